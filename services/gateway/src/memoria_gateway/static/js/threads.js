// The thread list in the sidebar: newest first, an unread dot for threads that got frames
// while another one was open, inline rename (Enter saves, Esc cancels).
//
// Threads come from GET/POST/PATCH /api/threads. A gateway without those routes (404) still
// gets a working list: threads are then kept in this browser only.

import { ApiError } from "./api.js";
import { clientId } from "./ids.js";
import { h, icon } from "./dom.js";
import { formatRelative } from "./format.js";

export const UNTITLED = "New chat";

function preview(thread) {
  const last = thread.last_message;
  if (!last) return "";
  if (typeof last === "string") return last;
  if (typeof last === "object" && typeof last.content === "string") return last.content;
  return "";
}

export function titleOf(thread) {
  return (thread && typeof thread.title === "string" && thread.title.trim()) || UNTITLED;
}

export class ThreadList {
  constructor({ list, empty, api, user, onSelect, onRenamed, onChange, notify }) {
    this.list = list;
    this.empty = empty;
    this.api = api;
    this.user = user;
    this.onSelect = onSelect;
    this.onRenamed = onRenamed;
    this.onChange = onChange;
    this.notify = notify;
    this.threads = [];
    this.activeId = null;
    this.unread = new Set();
    this.local = false; // the gateway has no thread routes: keep them in localStorage
    this.editing = null;
    this.refreshTimer = null;
  }

  get(id) {
    return this.threads.find((t) => t.thread_id === id) || null;
  }

  async refresh() {
    if (this.local) { this.render(); return; }
    try {
      this.threads = await this.api.listThreads();
    } catch (error) {
      if (error instanceof ApiError && (error.status === 404 || error.status === 405)) {
        this.local = true;
        this.threads = this.loadLocal();
      } else if (!(error instanceof ApiError && error.status === 401)) {
        this.notify(`Could not load your conversations: ${error.message}`, { kind: "error" });
      }
    }
    this.render();
  }

  /** Refresh soon, once, however many frames ask for it. */
  refreshSoon(delay = 400) {
    clearTimeout(this.refreshTimer);
    this.refreshTimer = setTimeout(() => this.refresh(), delay);
  }

  async create() {
    let thread;
    if (this.local) {
      const now = new Date().toISOString();
      thread = { thread_id: clientId("t"), title: null, created_at: now, updated_at: now, message_count: 0, last_message: null };
    } else {
      thread = await this.api.createThread();
    }
    this.threads = [thread, ...this.threads.filter((t) => t.thread_id !== thread.thread_id)];
    this.saveLocal();
    this.render();
    return thread;
  }

  setActive(id) {
    this.activeId = id;
    this.unread.delete(id);
    this.render();
  }

  markUnread(id) {
    if (id === this.activeId) return;
    this.unread.add(id);
    if (!this.get(id)) this.refreshSoon();
    else this.render();
  }

  /** The open thread got a message: move it up and show it as the preview. */
  touch(id, text) {
    const thread = this.get(id);
    if (!thread) { this.refreshSoon(); return; }
    thread.updated_at = new Date().toISOString();
    if (typeof text === "string") thread.last_message = text;
    this.threads = [thread, ...this.threads.filter((t) => t !== thread)];
    this.saveLocal();
    this.render();
  }

  async rename(id, title) {
    const thread = this.get(id);
    if (!thread) return;
    if (!this.local) {
      const updated = await this.api.renameThread(id, title);
      Object.assign(thread, updated && updated.thread_id ? updated : { title });
    } else {
      thread.title = title;
    }
    this.saveLocal();
  }

  startRename(id) {
    const item = this.list.querySelector(`[data-thread-id="${CSS.escape(id)}"]`);
    const thread = this.get(id);
    if (!item || !thread) return;
    this.editing = id;
    const input = h("input", {
      class: "thread__input", value: titleOf(thread) === UNTITLED && !thread.title ? "" : titleOf(thread),
      maxlength: 200, dir: "auto", "aria-label": "Conversation title", placeholder: UNTITLED,
    });
    let done = false;
    const finish = async (save) => {
      if (done) return;
      done = true;
      const title = input.value.trim();
      if (save && title && title !== thread.title) {
        try {
          await this.rename(id, title);
        } catch (error) {
          this.notify(`Could not rename: ${error.message}`, { kind: "error" });
        }
      }
      this.editing = null;
      this.render();
      const again = this.list.querySelector(`[data-thread-id="${CSS.escape(id)}"] .thread__rename`);
      if (again) again.focus();
      this.onRenamed(id);
    };
    input.addEventListener("keydown", (event) => {
      if (event.key === "Enter") { event.preventDefault(); finish(true); }
      if (event.key === "Escape") { event.preventDefault(); event.stopPropagation(); finish(false); }
    });
    input.addEventListener("blur", () => finish(true));
    item.classList.add("is-editing");
    item.replaceChildren(input);
    input.focus();
    input.select();
  }

  render() {
    if (this.editing) return; // keep the field the user is typing in
    this.empty.hidden = this.threads.length > 0;
    this.list.replaceChildren(...this.threads.map((thread) => this.item(thread)));
    this.onChange();
  }

  item(thread) {
    const id = thread.thread_id;
    const title = titleOf(thread);
    const active = id === this.activeId;
    const unread = this.unread.has(id);
    const when = thread.updated_at || thread.created_at;
    return h("li", { class: `thread${active ? " is-active" : ""}${unread ? " is-unread" : ""}`, dataset: { threadId: id } },
      h("button", {
        class: "thread__main", type: "button", "aria-current": active ? "page" : null,
        onclick: () => this.onSelect(id, { reload: true }),
      },
      h("span", { class: "thread__row" },
        h("span", { class: "thread__title", dir: "auto" }, title),
        when ? h("time", { class: "thread__time", datetime: when }, formatRelative(when)) : null),
      h("span", { class: "thread__preview", dir: "auto" }, preview(thread) || "No messages yet"),
      unread ? h("span", { class: "thread__dot", role: "img", "aria-label": "new messages" }) : null),
      h("button", {
        class: "icon-btn thread__rename", type: "button", "aria-label": `Rename “${title}”`, title: "Rename",
        onclick: () => this.startRename(id),
      }, icon("pencil")));
  }

  localKey() {
    return `memoria.threads.${this.user}`;
  }

  loadLocal() {
    try {
      const saved = JSON.parse(localStorage.getItem(this.localKey()) || "[]");
      return Array.isArray(saved) ? saved : [];
    } catch (_) {
      return [];
    }
  }

  saveLocal() {
    if (!this.local) return;
    try {
      localStorage.setItem(this.localKey(), JSON.stringify(this.threads));
    } catch (_) { /* the list then lasts as long as the page */ }
  }
}
