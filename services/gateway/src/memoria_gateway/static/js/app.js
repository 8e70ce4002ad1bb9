// Memoria's web chat: wires log-in, the thread list, the conversation, the socket and the
// memories drawer. Each of those lives in its own module; this one only routes between them.

import { Api, ApiError } from "./api.js";
import { Conversation } from "./conversation.js";
import { byId, setText, shownText } from "./dom.js";
import { clientId } from "./ids.js";
import { MessageLimit } from "./limit.js";
import { MemoriesPanel } from "./memories.js";
import { clearNotices, initNotices, notify } from "./notices.js";
import { PersonaPicker } from "./persona.js";
import { resendDelay } from "./resend.js";
import { clearSession, loadSession, saveSession, tokenName, tokenSubject } from "./session.js";
import { ChatSocket } from "./socket.js";
import { initTheme } from "./theme.js";
import { ThreadList, titleOf } from "./threads.js";

const THREAD_KEY = "memoria.thread";
const HISTORY_PAGE = 100; // messages per load of a thread's history (the newest first)
const HISTORY_MAX = 1000; // the most one request may ask for (the gateway's bound)
const MEMORY_ACTIONS = new Set(["MemorySave", "MemoryUpdate", "MemoryDelete"]);
const ERROR_TEXT = {
  invalid_frame: "The message was refused",
  too_large: "The message is too long",
  rate_limited: "Slow down: too many messages",
  too_many_connections: "Too many open tabs",
  broker_unavailable: "The message could not be queued; please send it again",
};

const state = {
  session: null, // {token, userId, name}
  threadId: null,
  socket: null,
  threads: null,
  memories: null,
  personas: null,
  cycles: new Map(), // cycle id → {id, threadId, state, statuses, actions, reason, usage, startedAt, endedAt}
  sent: new Map(), // client id → {threadId, content}
  loading: null, // {threadId, frames}: live frames of the thread whose history is loading
  tokenMode: false,
};

const api = new Api(() => state.session && state.session.token, () => logout("Your session has ended. Please log in again."));
const messageLimit = new MessageLimit({ input: byId("composer-input"), counter: byId("composer-count"), send: byId("send") });
const conversation = new Conversation({ list: byId("messages"), scroller: byId("scroller"), empty: byId("empty-state"), jump: byId("jump") });

// Test hook and console helper: the live socket, the open thread.
window.__memoria = {
  socket: {
    close: () => state.socket && state.socket.drop(),
    get state() { return state.socket ? state.socket.state : "idle"; },
    get lastEventId() { return state.socket ? state.socket.lastEventId : null; },
    set lastEventId(id) { if (state.socket) state.socket.lastEventId = id; },
  },
  get threadId() { return state.threadId; },
  resumes: [], // every {"type": "resumed"} (or assumed gap) after a reconnect
};

// ---- log in / out --------------------------------------------------------------------------

function showLogin(message) {
  byId("app-view").hidden = true;
  byId("login-view").hidden = false;
  const error = byId("login-error");
  error.textContent = message || "";
  error.hidden = !message;
  (state.tokenMode ? byId("login-token") : byId("login-user")).focus();
}

function tokenMode(on) {
  state.tokenMode = on;
  byId("login-token-field").hidden = !on;
  byId("login-user-field").hidden = on;
  byId("login-submit").textContent = on ? "Use this token" : "Continue";
}

async function onLogin(event) {
  event.preventDefault();
  const error = byId("login-error");
  error.hidden = true;
  const button = byId("login-submit");
  button.disabled = true;
  try {
    if (state.tokenMode) {
      const token = byId("login-token").value.trim();
      if (!token) throw new Error("Paste a token first.");
      const userId = tokenSubject(token) || "you";
      startSession({ token, userId, name: tokenName(token) || userId });
      return;
    }
    // Any name, in any script: the gateway maps it to a stable user id and says which.
    const name = byId("login-user").value.trim();
    if (!name) throw new Error("Type your name first.");
    const answer = await api.login(name);
    startSession({ token: answer.token, userId: answer.user_id, name: answer.name || answer.user_id });
  } catch (failure) {
    if (failure instanceof ApiError && failure.status === 404) {
      tokenMode(true);
      showLogin();
      byId("login-token").focus();
    } else {
      error.textContent = failure.message;
      error.hidden = false;
    }
  } finally {
    button.disabled = false;
  }
}

function startSession(session) {
  state.session = session;
  saveSession(session);
  enterApp();
}

function logout(message) {
  if (state.socket) state.socket.stop();
  state.socket = null;
  state.session = null;
  state.threadId = null;
  state.cycles.clear();
  state.sent.clear();
  clearSession();
  clearNotices();
  if (state.memories && state.memories.isOpen) state.memories.close();
  conversation.reset();
  showLogin(message);
}

// ---- the app -------------------------------------------------------------------------------

async function enterApp() {
  byId("login-view").hidden = true;
  byId("app-view").hidden = false;
  const user = state.session.userId;
  const name = state.session.name || user; // the name as typed; sessions saved before names: the id
  setText(byId("user-name"), name);
  byId("user-name").title = name === user ? "" : `User id: ${user}`;
  byId("user-avatar").textContent = ([...name][0] || "?").toUpperCase(); // a whole character, not half a surrogate pair

  state.threads = new ThreadList({
    list: byId("thread-list"), empty: byId("threads-empty"), api, user,
    onSelect: (id) => { closeSidebar(); openThread(id); },
    onRenamed: (id) => { if (id === state.threadId) showTitle(); },
    onChange: () => showTitle(),
    notify,
  });
  state.memories = state.memories || new MemoriesPanel({
    drawer: byId("memories"), openButton: byId("memories-open"), closeButton: byId("memories-close"),
    list: byId("memories-list"), more: byId("memories-more"), form: byId("memories-search"),
    query: byId("memories-query"), summary: byId("memories-summary"), api, notify,
  });

  state.personas = state.personas || new PersonaPicker({ select: byId("persona-select"), api, notify });

  state.socket = new ChatSocket({
    token: () => state.session.token,
    onFrame, onReply, onResumed, onState: showConnection,
    onUnauthorized: () => logout("Your session has expired or the token is not valid. Please log in again."),
  });
  state.socket.start();
  loadLimits();

  await state.threads.refresh();
  if (!state.session) return;
  await state.personas.load();
  if (!state.session) return; // a refused token logs out while the personas load
  const saved = sessionStorage.getItem(THREAD_KEY);
  const first = state.threads.get(saved) || state.threads.threads[0];
  if (first) await openThread(first.thread_id);
  else await newThread();
}

/** The gateway's message limit, for the counter; unknown (nothing blocked) if it cannot say. */
async function loadLimits() {
  try {
    messageLimit.setMax((await api.limits()).max_message_chars);
  } catch (_) { /* an older gateway: its refusal (too_large) still says the limit */ }
}

async function newThread() {
  try {
    const thread = await state.threads.create();
    await openThread(thread.thread_id);
    closeSidebar();
    byId("composer-input").focus();
  } catch (error) {
    notify(`Could not start a new chat: ${error.message}`, { kind: "error" });
  }
}

function showTitle() {
  if (!state.threadId) return;
  const thread = state.threads && state.threads.get(state.threadId);
  const title = titleOf(thread);
  setText(byId("thread-title"), title);
  document.title = `\u2068${shownText(title)}\u2069 · Memoria`; // first-strong isolate: a title cannot reorder the rest
}

async function openThread(id) {
  state.threadId = id;
  sessionStorage.setItem(THREAD_KEY, id);
  state.threads.setActive(id);
  showTitle();
  conversation.reset();
  state.personas.show(id); // in parallel with the history
  await reloadThread();
  if (matchMedia("(min-width: 900px)").matches) byId("composer-input").focus();
}

/** Draws the open thread from its stored messages, plus what is still live. */
async function reloadThread() {
  const id = state.threadId;
  if (!id) return;
  // Frames that arrive while the history loads are kept and drawn over it: drawing the
  // history first would wipe them.
  const loading = { threadId: id, frames: state.loading && state.loading.threadId === id ? state.loading.frames : [] };
  state.loading = loading;
  byId("messages").setAttribute("aria-busy", "true");
  // Drawing the thread on screen again (a resume that could not replay everything) keeps
  // the older messages the reader loaded: ask for as many, and one more to tell whether
  // older ones remain. A thread just opened has nothing on screen: one page.
  const asked = Math.min(HISTORY_MAX, Math.max(HISTORY_PAGE, conversation.size() + 1));
  let frames;
  try {
    frames = await api.threadMessages(id, asked);
  } catch (error) {
    if (state.loading === loading) {
      state.loading = null;
      byId("messages").setAttribute("aria-busy", "false");
    }
    if (!(error instanceof ApiError && error.status === 401)) notify(`Could not load the conversation: ${error.message}`, { kind: "error" });
    for (const frame of loading.frames) showFrame(frame);
    return;
  }
  if (state.loading !== loading) return; // another load (or thread) started meanwhile
  state.loading = null;
  byId("messages").setAttribute("aria-busy", "false");
  conversation.renderHistory(frames);
  offerEarlier(id, frames.length, asked);
  for (const [localId, sent] of state.sent) {
    if (sent.threadId === id) conversation.addPending(localId, sent.content, !state.socket.connected);
  }
  for (const cycle of state.cycles.values()) {
    if (cycle.threadId === id && cycle.state !== "ended") conversation.cycle(cycle);
  }
  for (const frame of loading.frames) showFrame(frame);
}

/** A full page may have older messages behind it: offer to load them, a page at a time. */
function offerEarlier(threadId, shown, asked = HISTORY_PAGE) {
  conversation.setEarlier(shown >= asked ? () => loadEarlier(threadId) : null);
}

async function loadEarlier(threadId) {
  const before = conversation.oldestId();
  let frames;
  try {
    frames = await api.threadMessages(threadId, HISTORY_PAGE, before);
  } catch (error) {
    if (!(error instanceof ApiError && error.status === 401)) notify(`Could not load earlier messages: ${error.message}`, { kind: "error" });
    return;
  }
  if (state.threadId !== threadId) return; // another thread was opened meanwhile
  conversation.prependHistory(frames);
  offerEarlier(threadId, frames.length);
}

// ---- frames --------------------------------------------------------------------------------

function cycleFor(frame) {
  if (!frame.cycle_id) return null;
  let cycle = state.cycles.get(frame.cycle_id);
  if (!cycle) {
    cycle = { id: frame.cycle_id, threadId: frame.thread_id, state: "running", statuses: [], actions: [], startedAt: Date.now() };
    state.cycles.set(cycle.id, cycle);
  }
  return cycle;
}

function pruneCycles(keep = 100) {
  const ended = [...state.cycles.values()].filter((c) => c.state === "ended");
  for (const cycle of ended.slice(0, Math.max(0, ended.length - keep))) state.cycles.delete(cycle.id);
}

function onFrame(frame) {
  if (frame.type === "error") {
    if (frame.code !== "unauthorized") notify(`${ERROR_TEXT[frame.code] || "Error"}: ${frame.message}`, { kind: "error", code: frame.code });
    return;
  }
  if (!frame.thread_id) return; // a frame type this page does not know
  const open = frame.thread_id === state.threadId;
  const cycle = cycleFor(frame);

  if (frame.type === "message") {
    if (cycle && cycle.state !== "ended") {
      cycle.state = "running";
      if (frame.modal === "textForReplace") {
        const step = String(frame.content ?? "").replace(/\s*(\.{3}|…)$/, "");
        if (step && cycle.statuses[cycle.statuses.length - 1] !== step) cycle.statuses.push(step);
      }
    }
    if (!open) { state.threads.markUnread(frame.thread_id); return; }
    if (frame.modal !== "textForReplace" && typeof frame.content === "string") state.threads.touch(frame.thread_id, frame.content);
    showFrame(frame);
  } else if (frame.type === "delta") {
    if (open) showFrame(frame);
  } else if (frame.type === "cycle_end") {
    if (cycle) Object.assign(cycle, { state: "ended", actions: frame.actions || [], reason: frame.reason, usage: frame.usage || null, endedAt: Date.now() });
    if (open) {
      showFrame(frame);
      state.personas.refresh(frame.thread_id); // another tab may have switched it
    } else state.threads.markUnread(frame.thread_id);
    // The server names a thread after its first message once it has stored it: look twice.
    state.threads.refreshSoon(600);
    setTimeout(() => state.threads && state.threads.refreshSoon(0), 3000);
    pruneCycles();
    if ((frame.actions || []).some((a) => MEMORY_ACTIONS.has(a))) state.memories.refreshIfOpen();
  }
}

/** Draws a frame of the open thread (or keeps it until the thread's history is drawn). */
function showFrame(frame) {
  if (state.loading && state.loading.threadId === frame.thread_id) {
    state.loading.frames.push(frame);
    return;
  }
  const cycle = frame.cycle_id ? state.cycles.get(frame.cycle_id) : null;
  if (frame.type === "message") {
    conversation.message(frame);
    if (cycle && cycle.state !== "ended") conversation.cycle(cycle);
  } else if (frame.type === "delta") {
    conversation.delta(frame);
  } else if (frame.type === "cycle_end" && cycle) {
    conversation.cycle(cycle);
  }
}

function onReply(sent, reply) {
  const mine = state.sent.get(sent.id);
  if (mine && reply.type !== "accepted") {
    mine.refusals = (mine.refusals || 0) + 1;
    const wait = resendDelay(reply, mine.refusals);
    if (wait !== null) {
      resendLater(sent, wait);
      return;
    }
  }
  state.sent.delete(sent.id);
  const open = sent.thread_id === state.threadId;
  if (reply.type === "accepted") {
    const cycleId = `cyc_${reply.id.replace(/^msg_/, "")}`;
    if (open) conversation.confirm(sent.id, reply.id, cycleId);
    let cycle = state.cycles.get(cycleId);
    // A duplicate's cycle may have ended while we were away: draw a footer only from its frames.
    if (!cycle && reply.duplicate) return;
    if (!cycle) {
      cycle = { id: cycleId, threadId: sent.thread_id, state: reply.queued ? "queued" : "running", statuses: [], actions: [], startedAt: Date.now() };
      state.cycles.set(cycleId, cycle);
    }
    if (open && cycle.state !== "ended") conversation.cycle(cycle);
    return;
  }
  // Refused: nothing was queued. Give the text back so it can be sent again.
  if (open) conversation.remove(sent.id);
  const input = byId("composer-input");
  if (mine && !input.value.includes(mine.content)) {
    input.value = input.value ? `${mine.content}\n${input.value}` : mine.content;
    autosize();
  }
  notify(`${ERROR_TEXT[reply.code] || "Refused"}: ${reply.message}`, { kind: "error", code: reply.code });
}

/** Not taken yet, but not refused for good: the same frame (same client id) goes again. */
function resendLater(frame, seconds) {
  const shown = () => frame.thread_id === state.threadId;
  if (shown()) conversation.pendingNote(frame.id, `Not sent yet: trying again in ${Math.max(1, Math.ceil(seconds))} s…`);
  setTimeout(() => {
    if (!state.socket || !state.sent.has(frame.id)) return; // logged out meanwhile
    if (shown()) conversation.pendingNote(frame.id, state.socket.connected ? "Sending…" : "Waiting for the connection…");
    state.socket.send(frame);
  }, seconds * 1000);
}

function onResumed(resumed) {
  window.__memoria.resumes.push(resumed);
  if (!resumed.complete) reloadThread();
  state.threads.refreshSoon(0);
}

function showConnection(socketState) {
  const pill = byId("connection");
  pill.dataset.state = socketState;
  const text = { connecting: "Connecting…", connected: "Connected", reconnecting: "Reconnecting…", closed: "Offline" }[socketState] || socketState;
  pill.querySelector(".conn__text").textContent = text;
  for (const element of document.querySelectorAll(".msg.is-pending .msg__meta")) {
    element.textContent = socketState === "connected" ? "Sending…" : "Waiting for the connection…";
  }
}

// ---- composer ------------------------------------------------------------------------------

/** Fits the composer to its text (and updates the limit's counter): after every change. */
function autosize() {
  messageLimit.refresh();
  const input = byId("composer-input");
  const stick = conversation.nearBottom(); // a taller composer must not hide the last message
  input.style.height = "auto";
  input.style.height = `${Math.min(input.scrollHeight, 220)}px`;
  if (stick) conversation.scrollToBottom(true);
}

async function send(event) {
  event.preventDefault();
  const input = byId("composer-input");
  const content = input.value;
  if (!content.trim() || !state.socket) return;
  const over = messageLimit.over();
  if (over) { // never cut: the text stays for the user to shorten
    notify(`The message is too long: ${over.toLocaleString()} characters over the limit of ${messageLimit.max.toLocaleString()}. Shorten it or split it, then send.`, { kind: "error", code: "too_large" });
    return;
  }
  if (!state.threadId) await newThread();
  if (!state.threadId) return;
  const frame = { type: "message", thread_id: state.threadId, content, id: clientId("m") };
  state.sent.set(frame.id, { threadId: frame.thread_id, content });
  conversation.addPending(frame.id, content, !state.socket.connected);
  state.socket.send(frame);
  state.threads.touch(frame.thread_id, content);
  input.value = "";
  autosize();
}

// ---- layout --------------------------------------------------------------------------------

function openSidebar() {
  document.body.classList.add("sidebar-open");
  byId("scrim").hidden = false;
  byId("sidebar-open").setAttribute("aria-expanded", "true");
  const active = byId("thread-list").querySelector(".is-active .thread__main") || byId("new-thread");
  active.focus();
}

function closeSidebar() {
  if (!document.body.classList.contains("sidebar-open")) return;
  document.body.classList.remove("sidebar-open");
  byId("scrim").hidden = true;
  byId("sidebar-open").setAttribute("aria-expanded", "false");
}

function wire() {
  initTheme();
  initNotices(byId("notices"));
  byId("login-form").addEventListener("submit", onLogin);
  byId("logout").addEventListener("click", () => logout());
  byId("new-thread").addEventListener("click", newThread);
  byId("composer").addEventListener("submit", send);
  const input = byId("composer-input");
  input.addEventListener("input", autosize);
  input.addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      byId("composer").requestSubmit();
    }
  });
  byId("thread-title").addEventListener("dblclick", () => state.threadId && state.threads.startRename(state.threadId));
  byId("sidebar-open").addEventListener("click", openSidebar);
  byId("sidebar-close").addEventListener("click", () => { closeSidebar(); byId("sidebar-open").focus(); });
  byId("scrim").addEventListener("click", closeSidebar);
  document.addEventListener("keydown", (event) => { if (event.key === "Escape") closeSidebar(); });
  // Back in view: the open thread's persona may have been switched in another tab.
  document.addEventListener("visibilitychange", () => {
    if (document.visibilityState === "visible" && state.personas) state.personas.refresh(state.threadId);
  });
  for (const chip of document.querySelectorAll("[data-suggest]")) {
    chip.addEventListener("click", () => {
      input.value = chip.dataset.suggest;
      autosize();
      input.focus();
      input.setSelectionRange(input.value.length, input.value.length);
    });
  }
}

wire();
const saved = loadSession();
if (saved) {
  state.session = saved;
  enterApp();
} else {
  showLogin();
}
