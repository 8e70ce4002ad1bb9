// The chat WebSocket (docs/protocol.md): connects with the token (as a subprotocol), reconnects with backoff and
// resumes from the last event it saw, resends messages whose reply never came (their client
// id makes that safe), and pairs each accepted/error reply with the frame it answers.

const UNAUTHORIZED = 4401;
const TOO_MANY_CONNECTIONS = 4429; // this user's sockets on the server are at the cap
const REFUSALS = new Set(["unauthorized", "too_many_connections"]); // about the socket, not a frame
const BACKOFF_MS = [500, 1000, 2000, 4000, 8000, 15000];
const RESUME_WAIT_MS = 10000;
const SUBPROTOCOL = "memoria.v1";
const BEARER_PREFIX = "bearer.";

export class ChatSocket {
  /**
   * @param {object} options
   * @param {() => string} options.token
   * @param {(frame: object) => void} options.onFrame        every server frame but replies
   * @param {(sent: object, reply: object) => void} options.onReply  accepted/error for a sent frame
   * @param {(state: string) => void} options.onState         connecting | connected | reconnecting | closed
   * @param {(resumed: object) => void} options.onResumed     after a reconnect: {complete, replayed}
   * @param {() => void} options.onUnauthorized
   */
  constructor(options) {
    this.options = options;
    this.ws = null;
    this.state = "idle";
    this.lastEventId = null;
    this.pending = []; // sent on the current socket, waiting for their reply, in order
    this.outbox = []; // waiting for an open socket
    this.attempt = 0;
    this.everConnected = false;
    this.stopped = false;
    this.retryTimer = null;
    this.resumeTimer = null;
    this.onOnline = () => { if (this.state === "reconnecting") this.reconnectNow(); };
  }

  start() {
    this.stopped = false;
    window.addEventListener("online", this.onOnline);
    this.open();
  }

  /** Close for good (log out). */
  stop() {
    this.stopped = true;
    window.removeEventListener("online", this.onOnline);
    clearTimeout(this.retryTimer);
    clearTimeout(this.resumeTimer);
    if (this.ws) {
      this.ws.onclose = null;
      this.ws.close(1000, "bye");
      this.ws = null;
    }
    this.setState("closed");
  }

  /** Close the current socket as a network failure would; a reconnect follows. */
  drop() {
    if (this.ws) this.ws.close(4000, "dropped by the client");
  }

  reconnectNow() {
    clearTimeout(this.retryTimer);
    if (!this.stopped && (!this.ws || this.ws.readyState === WebSocket.CLOSED)) this.open();
  }

  /** Sends now when connected, else when the socket opens. */
  send(frame) {
    if (this.ws && this.ws.readyState === WebSocket.OPEN) {
      this.pending.push(frame);
      this.ws.send(JSON.stringify(frame));
      return "sent";
    }
    this.outbox.push(frame);
    return "queued";
  }

  get connected() {
    return this.state === "connected";
  }

  setState(state) {
    if (this.state === state) return;
    this.state = state;
    this.options.onState(state);
  }

  url() {
    const scheme = location.protocol === "https:" ? "wss" : "ws";
    const params = new URLSearchParams();
    if (this.lastEventId) params.set("since", this.lastEventId);
    const query = params.toString();
    return `${scheme}://${location.host}/ws${query ? `?${query}` : ""}`;
  }

  // The token rides in the handshake's Sec-WebSocket-Protocol, not the URL (URLs get logged);
  // the server answers with "memoria.v1" only.
  protocols() {
    return [SUBPROTOCOL, `${BEARER_PREFIX}${this.options.token()}`];
  }

  open() {
    const resuming = this.everConnected;
    const since = this.lastEventId;
    this.setState(resuming ? "reconnecting" : "connecting");
    const ws = new WebSocket(this.url(), this.protocols());
    this.ws = ws;
    ws.onopen = () => {
      if (ws !== this.ws) return;
      this.attempt = 0;
      this.everConnected = true;
      this.setState("connected");
      const resend = [...this.pending, ...this.outbox];
      this.pending = [];
      this.outbox = [];
      for (const frame of resend) this.send(frame);
      if (resuming && since) {
        // The server replays what we missed, then says {"type": "resumed"}. A server that
        // cannot resume says nothing: then treat the gap as unknown.
        this.resumeTimer = setTimeout(() => this.options.onResumed({ complete: false, replayed: 0, assumed: true }), RESUME_WAIT_MS);
      } else if (resuming) {
        this.options.onResumed({ complete: false, replayed: 0, assumed: true });
      }
    };
    ws.onmessage = (event) => {
      if (ws !== this.ws) return;
      let frame;
      try {
        frame = JSON.parse(event.data);
      } catch (_) {
        return; // not ours to interpret
      }
      if (!frame || typeof frame !== "object") return;
      if (typeof frame.event_id === "string" && frame.event_id) this.lastEventId = frame.event_id;
      if (frame.type === "resumed") {
        clearTimeout(this.resumeTimer);
        this.options.onResumed(frame);
        return;
      }
      const isReply = frame.type === "accepted" || (frame.type === "error" && !REFUSALS.has(frame.code));
      if (isReply && this.pending.length) {
        this.options.onReply(this.pending.shift(), frame);
        return;
      }
      if (frame.type === "accepted") return; // a reply to nothing we remember
      this.options.onFrame(frame);
    };
    ws.onclose = (event) => {
      if (ws !== this.ws) return;
      clearTimeout(this.resumeTimer);
      this.ws = null;
      // Unanswered frames go first when the next socket opens.
      this.outbox = [...this.pending, ...this.outbox];
      this.pending = [];
      if (this.stopped) return;
      if (event.code === UNAUTHORIZED) {
        this.stopped = true;
        this.setState("closed");
        this.options.onUnauthorized();
        return;
      }
      if (event.code === TOO_MANY_CONNECTIONS) {
        // Retrying would only be refused again until another tab closes: stay offline (the
        // error frame before the close told the user why); a reload connects again.
        this.stopped = true;
        this.setState("closed");
        return;
      }
      this.setState("reconnecting");
      const base = BACKOFF_MS[Math.min(this.attempt, BACKOFF_MS.length - 1)];
      this.attempt += 1;
      const delay = base * (0.75 + Math.random() * 0.5);
      this.retryTimer = setTimeout(() => this.reconnectNow(), delay);
    };
  }
}
