// The gateway's HTTP API (docs/protocol.md): dev login, threads, a thread's messages, its
// session config and the personas, and the memories of the logged-in user. Every call but login sends the bearer token.

export class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.name = "ApiError";
    this.status = status;
  }
}

function describe(body, status) {
  const detail = body && body.detail;
  if (typeof detail === "string") return detail;
  if (Array.isArray(detail)) {
    return detail.map((d) => (d && d.msg ? `${(d.loc || []).slice(1).join(".")} ${d.msg}`.trim() : String(d))).join("; ");
  }
  return `request failed (${status})`;
}

export class Api {
  /** @param {() => string | null} token  @param {() => void} onUnauthorized */
  constructor(token, onUnauthorized) {
    this.token = token;
    this.onUnauthorized = onUnauthorized;
  }

  async request(method, path, { body, query, auth = true } = {}) {
    const url = new URL(path, location.origin);
    for (const [key, value] of Object.entries(query || {})) {
      if (value === undefined || value === null || value === "") continue;
      for (const item of Array.isArray(value) ? value : [value]) url.searchParams.append(key, String(item));
    }
    const headers = { Accept: "application/json" };
    if (body !== undefined) headers["Content-Type"] = "application/json";
    if (auth) headers.Authorization = `Bearer ${this.token() || ""}`;
    let response;
    try {
      response = await fetch(url, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
    } catch (_) {
      throw new ApiError(0, "the server is not reachable");
    }
    let data = null;
    const text = await response.text();
    if (text) {
      try { data = JSON.parse(text); } catch (_) { data = null; }
    }
    if (!response.ok) {
      if (response.status === 401 && auth) this.onUnauthorized();
      throw new ApiError(response.status, describe(data, response.status));
    }
    return data;
  }

  /** What the gateway accepts: {max_message_chars, max_frame_bytes}. */
  limits() {
    return this.request("GET", "/api/limits", { auth: false });
  }

  /** Dev login by the name a person typed (the answer has the user id it maps to); a 404
   * means it is disabled. */
  login(name) {
    return this.request("POST", "/api/token", { body: { name }, auth: false });
  }

  async listThreads() {
    const data = await this.request("GET", "/api/threads");
    return Array.isArray(data) ? data : (data && data.threads) || [];
  }

  createThread(title) {
    return this.request("POST", "/api/threads", { body: title ? { title } : {} });
  }

  renameThread(threadId, title) {
    return this.request("PATCH", `/api/threads/${encodeURIComponent(threadId)}`, { body: { title } });
  }

  /** The thread's stored messages, oldest first (either a list or {"messages": [...]}). */
  /** The newest `limit` stored messages, or with `before` (a message id) the ones just older. */
  async threadMessages(threadId, limit = 100, before = null) {
    const query = before ? { limit, before } : { limit };
    const data = await this.request("GET", `/api/threads/${encodeURIComponent(threadId)}/messages`, { query });
    return Array.isArray(data) ? data : (data && data.messages) || [];
  }

  /** {"default": id, "personas": [{id, name, description}]} */
  listPersonas() {
    return this.request("GET", "/api/personas");
  }

  threadConfig(threadId) {
    return this.request("GET", `/api/threads/${encodeURIComponent(threadId)}/config`);
  }

  changeThreadConfig(threadId, change) {
    return this.request("PATCH", `/api/threads/${encodeURIComponent(threadId)}/config`, { body: change });
  }

  listMemories({ limit = 50, cursor } = {}) {
    return this.request("GET", "/api/memories", { query: { limit, cursor } });
  }

  searchMemories(query, limit = 50) {
    return this.request("GET", "/api/memories/search", { query: { q: query, limit } });
  }

  /** {content, bindings, memory_type}: any of them; answers {memory, old_content, new_content}. */
  updateMemory(memoryId, change) {
    return this.request("PATCH", `/api/memories/${encodeURIComponent(memoryId)}`, { body: change });
  }

  deleteMemory(memoryId) {
    return this.request("DELETE", `/api/memories/${encodeURIComponent(memoryId)}`);
  }

  memoryHistory(memoryId) {
    return this.request("GET", `/api/memories/${encodeURIComponent(memoryId)}/history`);
  }
}
