// Minimal Memoria chat client: plain ES module, no build step. Renders the frames of
// docs/protocol.md: status lines replaced by the next message, streamed deltas, memory cards.
const $ = (id) => document.getElementById(id);
const log = $("log");
const statusLine = $("status");
let socket = null;
let session = null; // {token, user, thread}
let localCount = 0;
const unconfirmed = []; // local ids of sent messages, in order, waiting for "accepted"

function setConnection(text) { $("connection").textContent = text; }

function bubble(id, role, modal) {
  let node = id ? document.querySelector(`[data-id="${CSS.escape(id)}"]`) : null;
  if (!node) {
    node = document.createElement("div");
    if (id) node.dataset.id = id;
    node.append(document.createElement("span"));
    log.append(node);
  }
  node.className = `msg ${modal === "memory" ? "memory" : role}`;
  return node;
}

function showStatus(text) {
  statusLine.textContent = text;
  statusLine.hidden = !text;
}

function renderMessage(frame) {
  if (frame.modal === "textForReplace") { showStatus(frame.content); return; }
  showStatus("");
  const node = bubble(frame.id, frame.role, frame.modal);
  const body = node.firstChild;
  body.textContent = typeof frame.content === "string" ? frame.content : JSON.stringify(frame.content, null, 2);
  let meta = node.querySelector(".meta");
  if (frame.model) {
    if (!meta) { meta = document.createElement("span"); meta.className = "meta"; node.append(meta); }
    meta.textContent = frame.model;
  }
  log.scrollTop = log.scrollHeight;
}

function renderDelta(frame) {
  showStatus("");
  const node = bubble(frame.id, "assistant", "text");
  node.firstChild.textContent += frame.content;
  log.scrollTop = log.scrollHeight;
}

function renderNote(text, cls) {
  const node = document.createElement("div");
  node.className = cls;
  node.textContent = text;
  log.append(node);
  log.scrollTop = log.scrollHeight;
}

function onFrame(frame) {
  if (frame.thread_id && session && frame.thread_id !== session.thread) return;
  switch (frame.type) {
    case "message": renderMessage(frame); break;
    case "delta": renderDelta(frame); break;
    case "cycle_end": showStatus(""); renderNote(`${frame.actions.join(" → ")} (${frame.reason})`, "cycle-end"); break;
    case "accepted": {
      // The server echoes the message under its own id when its cycle starts: adopt that id.
      const local = unconfirmed.shift();
      const node = local && document.querySelector(`[data-id="${CSS.escape(local)}"]`);
      if (node) node.dataset.id = frame.id;
      if (frame.queued) showStatus("Queued: it runs after the current answer.");
      break;
    }
    case "error": {
      const local = unconfirmed.shift(); // a refused message is not kept: mark it
      const node = local && document.querySelector(`[data-id="${CSS.escape(local)}"]`);
      if (node) node.style.opacity = "0.5";
      renderNote(`${frame.code}: ${frame.message}`, "msg error");
      break;
    }
  }
}

async function loadHistory() {
  const response = await fetch(`/api/threads/${encodeURIComponent(session.thread)}/messages`, {
    headers: { Authorization: `Bearer ${session.token}` },
  });
  if (!response.ok) return;
  log.replaceChildren();
  for (const frame of await response.json()) renderMessage(frame);
}

function connect() {
  const scheme = location.protocol === "https:" ? "wss" : "ws";
  socket = new WebSocket(`${scheme}://${location.host}/ws?token=${encodeURIComponent(session.token)}`);
  setConnection("connecting…");
  socket.onopen = () => { setConnection(`connected as ${session.user}`); $("text").disabled = false; $("send").disabled = false; };
  socket.onmessage = (event) => onFrame(JSON.parse(event.data));
  socket.onclose = (event) => {
    $("send").disabled = true;
    setConnection(`disconnected (${event.code})`);
    if (event.code !== 4401 && session) setTimeout(connect, 2000);
  };
}

$("login").addEventListener("submit", async (event) => {
  event.preventDefault();
  const user = $("user").value.trim();
  const thread = $("thread").value.trim();
  const response = await fetch("/api/token", {
    method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify({ user_id: user }),
  });
  if (!response.ok) { renderNote(`login failed (${response.status})`, "msg error"); return; }
  const { token } = await response.json();
  if (socket) { socket.onclose = null; socket.close(); }
  session = { token, user, thread };
  await loadHistory();
  connect();
});

$("composer").addEventListener("submit", (event) => {
  event.preventDefault();
  const content = $("text").value;
  if (!content.trim() || !socket || socket.readyState !== WebSocket.OPEN) return;
  socket.send(JSON.stringify({ type: "message", thread_id: session.thread, content }));
  const local = `local-${++localCount}`;
  unconfirmed.push(local);
  renderMessage({ id: local, role: "user", modal: "text", content });
  $("text").value = "";
});

$("text").addEventListener("keydown", (event) => {
  if (event.key === "Enter" && !event.shiftKey) { event.preventDefault(); $("composer").requestSubmit(); }
});
