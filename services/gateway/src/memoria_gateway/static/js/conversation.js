// The open thread, drawn from frames: one element per message id (a message that arrives
// twice replaces itself), deltas appended to their bubble until the final message replaces
// them, a status row (textForReplace) that the next message or its cycle's end removes, memory
// cards, and one progress footer per live cycle. Model and memory text only ever becomes
// Text nodes (markdown.js, memory-card.js).

import { h, icon, setText } from "./dom.js";
import { formatCost, formatDateTime, formatDuration, formatTime, formatTokens } from "./format.js";
import { renderMarkdown } from "./markdown.js";
import { memoryCard } from "./memory-card.js";

const NEAR_BOTTOM_PX = 96;

export class Conversation {
  constructor({ list, scroller, empty, jump }) {
    this.list = list;
    this.scroller = scroller;
    this.empty = empty;
    this.jump = jump;
    this.items = new Map(); // message id → element
    this.footers = new Map(); // cycle id → element
    this.streams = new Map(); // message id → {text, frame}
    this.finished = new Set(); // ids whose final message has been shown
    this.status = null;
    this.earlier = null; // the "load earlier messages" row, while older ones remain
    this.scroller.addEventListener("scroll", () => { if (this.nearBottom()) this.jump.hidden = true; }, { passive: true });
    this.jump.addEventListener("click", () => this.scrollToBottom(true));
  }

  reset() {
    this.list.replaceChildren();
    this.earlier = null;
    this.items.clear();
    this.footers.clear();
    this.streams.clear();
    this.finished.clear();
    this.status = null;
    this.jump.hidden = true;
    this.refreshEmpty();
  }

  /** The thread drawn anew from its stored messages. A reader scrolled up in it (drawn
   * again after a reconnect) stays as far from the bottom; a thread just opened has nothing
   * on screen, so it shows its end. */
  renderHistory(frames) {
    const s = this.scroller;
    const fromBottom = s.scrollHeight - s.scrollTop;
    const following = this.nearBottom();
    this.reset();
    for (const frame of frames) {
      if (!isStored(frame)) continue;
      this.putMessage(frame);
      this.storedCycle(frame, this.items.get(frame.id));
    }
    this.refreshEmpty();
    if (!following) s.scrollTop = s.scrollHeight - fromBottom;
    else this.scrollToBottom(true);
  }

  has(id) {
    return this.items.has(id);
  }

  /** How many messages are on screen. */
  size() {
    return this.items.size;
  }

  /** The oldest message on screen (where loading earlier ones continues from). */
  oldestId() {
    const first = this.list.querySelector(":scope > li[data-id]");
    return first ? first.dataset.id : null;
  }

  /** Shows a "load earlier messages" row at the top that runs `load`; null removes it. */
  setEarlier(load) {
    if (this.earlier) this.earlier.remove();
    this.earlier = null;
    if (!load) return;
    const button = h("button", { class: "btn earlier__button", type: "button" }, "Load earlier messages");
    button.addEventListener("click", async () => {
      button.disabled = true;
      try {
        await load();
      } finally {
        button.disabled = false;
      }
    });
    this.earlier = h("li", { class: "earlier" }, button);
    this.list.prepend(this.earlier);
    this.refreshEmpty();
  }

  /** Older stored messages above the ones shown, keeping what is on screen where it is. */
  prependHistory(frames) {
    const s = this.scroller;
    const fromBottom = s.scrollHeight - s.scrollTop;
    const older = document.createDocumentFragment();
    for (const frame of frames) {
      if (!isStored(frame) || this.items.has(frame.id)) continue;
      const element = this.track(frame);
      element.classList.add("no-enter");
      older.append(element);
      this.storedCycle(frame, element);
    }
    this.list.insertBefore(older, this.earlier ? this.earlier.nextSibling : this.list.firstChild);
    s.scrollTop = s.scrollHeight - fromBottom;
    this.refreshEmpty();
  }

  // ---- frames ----------------------------------------------------------------------------

  message(frame) {
    this.mutate(() => {
      if (frame.modal === "textForReplace") this.showStatus(frame);
      else {
        this.clearStatus();
        this.putMessage(frame);
      }
    });
  }

  delta(frame) {
    if (this.finished.has(frame.id)) return; // a late piece of a message already complete
    this.mutate(() => {
      this.clearStatus();
      let stream = this.streams.get(frame.id);
      if (!stream) {
        const seed = { id: frame.id, cycle_id: frame.cycle_id, role: "assistant", modal: "text", content: "" };
        const element = this.items.get(frame.id) || this.place(buildText(seed), frame.cycle_id);
        element.classList.add("is-streaming");
        element.setAttribute("aria-busy", "true");
        this.items.set(frame.id, element);
        stream = { text: "", element, scheduled: false };
        this.streams.set(frame.id, stream);
      }
      stream.text += frame.content;
      if (!stream.scheduled) {
        stream.scheduled = true;
        requestAnimationFrame(() => {
          stream.scheduled = false;
          if (this.streams.get(frame.id) !== stream) return;
          const stick = this.nearBottom();
          const bubble = stream.element.querySelector(".bubble");
          bubble.replaceChildren(renderMarkdown(stream.text));
          withCaret(bubble);
          if (stick) this.scrollToBottom(true);
        });
      }
    });
  }

  /** A message the user just sent, before the server knows it. */
  addPending(localId, content, waiting) {
    this.mutate(() => {
      const element = buildText({ id: localId, role: "user", modal: "text", content });
      element.classList.add("is-pending");
      element.querySelector(".msg__meta").replaceChildren(waiting ? "Waiting for the connection…" : "Sending…");
      this.list.append(element);
      this.items.set(localId, element);
    }, true);
  }

  /** What a message the server has not taken yet is waiting for. */
  pendingNote(localId, text) {
    const element = this.items.get(localId);
    if (!element || !element.classList.contains("is-pending")) return;
    element.querySelector(".msg__meta").replaceChildren(text);
  }

  /** The server accepted a pending message under its own id. */
  confirm(localId, serverId, cycleId) {
    const element = this.items.get(localId);
    if (!element) return;
    this.items.delete(localId);
    if (this.items.has(serverId)) { // its echo came first
      element.remove();
      return;
    }
    element.dataset.id = serverId;
    element.dataset.cycle = cycleId || "";
    element.classList.remove("is-pending");
    element.querySelector(".msg__meta").replaceChildren(h("time", {}, formatTime(new Date())));
    this.items.set(serverId, element);
  }

  remove(id) {
    const element = this.items.get(id);
    if (element) element.remove();
    this.items.delete(id);
    this.refreshEmpty();
  }

  /** Draws (or redraws) the progress footer of a live cycle. */
  cycle(cycle) {
    this.mutate(() => {
      let footer = this.footers.get(cycle.id);
      const fresh = buildCycle(cycle);
      if (footer) {
        fresh.classList.add("no-enter");
        footer.replaceWith(fresh);
      } else {
        const last = this.lastOfCycle(cycle.id);
        if (last) last.after(fresh);
        else this.list.append(fresh);
      }
      footer = fresh;
      this.footers.set(cycle.id, footer);
      this.refreshEmpty();
      if (this.status && this.status.dataset.cycle === cycle.id) {
        // A status line lasts until the next message, or until its cycle ends: a cycle may
        // end with no message after it (a closing with nothing to add).
        if (cycle.state === "ended") this.clearStatus();
        else footer.before(this.status);
      }
    });
  }

  // ---- internals -------------------------------------------------------------------------

  /** The summary a stored message carries of its ended cycle (`cycle_end`), drawn after it
   * as it was when the cycle ended live; a cycle already drawn keeps its footer. */
  storedCycle(frame, element) {
    const end = frame.cycle_end;
    if (!end || !element || this.footers.has(end.cycle_id)) return;
    const footer = buildCycle({
      id: end.cycle_id, state: "ended", actions: end.actions || [], reason: end.reason,
      usage: end.usage || null, durationMs: end.duration_ms,
    });
    footer.classList.add("no-enter");
    element.after(footer);
    this.footers.set(end.cycle_id, footer);
  }

  putMessage(frame) {
    const existing = this.items.get(frame.id);
    const element = this.track(frame);
    if (existing) {
      element.classList.add("no-enter"); // it is already on screen: no entry animation again
      existing.replaceWith(element);
    } else {
      this.place(element, frame.cycle_id);
    }
  }

  /** The element of a complete message, recorded as the one shown for its id. */
  track(frame) {
    const element = frame.modal === "memory" ? buildMemory(frame) : buildText(frame);
    this.items.set(frame.id, element);
    this.streams.delete(frame.id);
    if (frame.modal === "text" && frame.role === "assistant") this.finished.add(frame.id);
    return element;
  }

  place(element, cycleId) {
    const footer = cycleId ? this.footers.get(cycleId) : null;
    if (footer && footer.isConnected) footer.before(element);
    else this.list.append(element);
    this.refreshEmpty();
    return element;
  }

  lastOfCycle(cycleId) {
    const members = this.list.querySelectorAll(`:scope > [data-cycle="${CSS.escape(cycleId)}"]:not(.cycle)`);
    return members.length ? members[members.length - 1] : null;
  }

  showStatus(frame) {
    if (!this.status) {
      this.status = h("li", { class: "status-row", role: "status" },
        h("span", { class: "dots", "aria-hidden": "true" }, h("i"), h("i"), h("i")),
        h("span", { class: "status-row__text", dir: "auto" }));
    }
    this.status.dataset.id = frame.id;
    this.status.dataset.cycle = frame.cycle_id || "";
    setText(this.status.querySelector(".status-row__text"), String(frame.content ?? ""));
    const footer = frame.cycle_id ? this.footers.get(frame.cycle_id) : null;
    if (footer && footer.isConnected) footer.before(this.status);
    else if (this.status.parentNode !== this.list || this.status !== this.list.lastElementChild) this.list.append(this.status);
    this.refreshEmpty();
  }

  clearStatus() {
    if (this.status) this.status.remove();
    this.status = null;
  }

  refreshEmpty() {
    this.empty.hidden = this.list.childElementCount > 0;
  }

  nearBottom() {
    const s = this.scroller;
    return s.scrollHeight - s.scrollTop - s.clientHeight < NEAR_BOTTOM_PX;
  }

  scrollToBottom(force = false) {
    if (force || this.nearBottom()) this.scroller.scrollTop = this.scroller.scrollHeight;
    this.jump.hidden = true;
  }

  /** Runs a change, then keeps the view at the bottom if it was there (or `follow`). */
  mutate(change, follow = false) {
    const stick = follow || this.nearBottom();
    change();
    if (stick) this.scrollToBottom(true);
    else this.jump.hidden = false;
  }
}

// ---- builders ----------------------------------------------------------------------------

/** A frame of a message kept in the thread's history (status lines never are). */
function isStored(frame) {
  return Boolean(frame) && frame.type === "message" && frame.modal !== "textForReplace";
}

/** A blinking caret at the end of the text being streamed (inside the last paragraph or item). */
function withCaret(bubble) {
  let target = bubble;
  while (target.lastElementChild && /^(P|UL|OL|LI|BLOCKQUOTE|H[1-6])$/.test(target.lastElementChild.tagName)) {
    target = target.lastElementChild;
  }
  target.append(h("span", { class: "caret", "aria-hidden": "true" }));
}

function roleOf(frame) {
  return frame.role === "user" || frame.role === "assistant" ? frame.role : "system";
}

function buildText(frame) {
  const role = roleOf(frame);
  const content = typeof frame.content === "string" ? frame.content : JSON.stringify(frame.content ?? "", null, 2);
  const attrs = { class: `msg msg--${role}`, dataset: { id: frame.id, role, cycle: frame.cycle_id || "" } };
  if (role === "system") {
    return h("li", attrs,
      h("div", { class: "notice-inline" }, icon("alert"), h("span", { class: "bubble", dir: "auto" }, content)));
  }
  // dir="auto" isolates the text (HTML gives [dir] unicode-bidi: isolate): a right-to-left
  // override in it cannot reorder the time, the model name or the next message.
  const bubble = h("div", { class: role === "assistant" ? "bubble md" : "bubble", dir: "auto" });
  if (role === "assistant") bubble.append(renderMarkdown(content));
  else setText(bubble, content);
  const meta = h("div", { class: "msg__meta" });
  if (role === "assistant" && frame.model === OFFLINE_PLANNER) {
    // No model is answering: the first answer of the conversation says so, then this badge.
    meta.append(h("span", { class: "model model--offline", title: "No language model is configured: Memoria's offline planner answers by rules" },
      icon("cpu"), h("span", { class: "model__name" }, "offline · no model")));
  } else if (role === "assistant" && frame.model) {
    meta.append(h("span", { class: "model", title: "Who wrote this answer" }, icon("cpu"), h("span", { class: "model__name", dir: "auto" }, frame.model)));
  }
  if (frame.created_at) meta.append(h("time", { datetime: frame.created_at, title: formatDateTime(frame.created_at) }, formatTime(frame.created_at)));
  const avatar = role === "assistant" ? h("span", { class: "msg__avatar", "aria-hidden": "true" }, icon("logo")) : null;
  return h("li", attrs, avatar, h("div", { class: "msg__body" },
    h("span", { class: "visually-hidden" }, role === "user" ? "You said:" : "Memoria said:"),
    bubble, meta));
}

const CARD_LABELS = { found: "Memory recalled", saved: "Memory saved", updated: "Memory updated" };

function buildMemory(frame) {
  const card = frame.card || {};
  const kind = CARD_LABELS[card.kind] ? card.kind : "found";
  return h("li", { class: `msg msg--memory msg--memory-${kind}`, dataset: { id: frame.id, role: "memory", cycle: frame.cycle_id || "" } },
    memoryCard(frame.content, {
      label: CARD_LABELS[kind],
      match: kind === "found" ? card.match || null : null,
      replaced: kind === "updated" ? card.replaced : undefined,
    }));
}

const OFFLINE_PLANNER = "offline planner (no LLM)";

const REASONS = {
  done: "Done",
  max_steps: "Stopped: too many steps",
  step_timeout: "Stopped: a step timed out",
  llm_error: "Stopped: the model failed",
  no_workers: "Stopped: no worker available",
  action_failed: "Stopped: an action failed",
};

function buildCycle(cycle) {
  const running = cycle.state !== "ended";
  const ok = cycle.reason === "done";
  const stateIcon = running
    ? h("span", { class: "spinner", "aria-hidden": "true" })
    : h("span", { class: `cycle__icon ${ok ? "is-ok" : "is-warn"}` }, icon(ok ? "check" : "alert"));
  const label = cycle.state === "queued" ? "Queued: starts when the current answer ends"
    : running ? "Working…"
      : REASONS[cycle.reason] || `Ended: ${cycle.reason}`;

  const steps = running ? cycle.statuses : cycle.actions || [];
  const stepList = steps.length
    ? h("ol", { class: "cycle__steps", "aria-label": running ? "Progress" : "Actions taken" },
      steps.map((step, index) => h("li", { class: running && index === steps.length - 1 ? "is-current" : "" }, step)))
    : null;

  const meta = [];
  if (cycle.endedAt && cycle.startedAt) meta.push(formatDuration(cycle.endedAt - cycle.startedAt));
  else if (typeof cycle.durationMs === "number") meta.push(formatDuration(cycle.durationMs)); // from the history
  const usage = cycle.usage;
  if (usage) {
    meta.push(`${formatTokens(usage.input_tokens)} in · ${formatTokens(usage.output_tokens)} out`);
    if (typeof usage.cost_usd === "number") meta.push(formatCost(usage.cost_usd));
  }
  return h("li", {
    class: "cycle",
    dataset: { cycle: cycle.id, state: cycle.state, reason: cycle.reason || "" },
    "aria-label": running ? "The assistant is working" : "Cycle summary",
  },
  stateIcon,
  h("span", { class: "cycle__label" }, label),
  stepList,
  meta.length ? h("span", { class: "cycle__meta" }, meta.join(" · ")) : null);
}
