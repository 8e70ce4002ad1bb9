// The memories drawer: list (newest first, "Load more" through the cursor), search by
// meaning, edit a text memory in place, delete after a confirmation, and each memory's
// history of changes.

import { confirmDialog } from "./confirm.js";
import { h, icon } from "./dom.js";
import { contentText, formatDateTime } from "./format.js";
import { MessageLimit } from "./limit.js";
import { memoryCard } from "./memory-card.js";

const PAGE = 50;
const SEARCH_DELAY_MS = 350;
const MAX_CONTENT_CHARS = 8000; // the gateway's limit on a memory's content

export class MemoriesPanel {
  constructor({ drawer, openButton, closeButton, list, more, form, query, summary, api, notify }) {
    Object.assign(this, { drawer, openButton, closeButton, list, more, form, query, summary, api, notify });
    this.cursor = null;
    this.mode = "list";
    this.count = 0;
    this.loading = false;
    this.searchTimer = null;
    this.generation = 0; // answers of an older request are dropped

    openButton.addEventListener("click", () => (this.isOpen ? this.close() : this.open()));
    closeButton.addEventListener("click", () => this.close());
    drawer.addEventListener("keydown", (event) => {
      if (event.key === "Escape" && !document.querySelector("dialog[open]")) { event.preventDefault(); this.close(); }
    });
    more.addEventListener("click", () => this.load(false));
    form.addEventListener("submit", (event) => { event.preventDefault(); this.runQuery(); });
    query.addEventListener("input", () => {
      clearTimeout(this.searchTimer);
      this.searchTimer = setTimeout(() => this.runQuery(), SEARCH_DELAY_MS);
    });
  }

  get isOpen() {
    return !this.drawer.hidden;
  }

  open() {
    this.drawer.hidden = false;
    this.openButton.setAttribute("aria-expanded", "true");
    document.body.classList.add("drawer-open");
    this.query.focus();
    this.runQuery();
  }

  close() {
    this.drawer.hidden = true;
    this.openButton.setAttribute("aria-expanded", "false");
    document.body.classList.remove("drawer-open");
    this.openButton.focus();
  }

  /** The chat changed memories: show the new state if the drawer is open. */
  refreshIfOpen() {
    if (this.isOpen) this.runQuery();
  }

  runQuery() {
    clearTimeout(this.searchTimer);
    const q = this.query.value.trim();
    if (q) this.search(q);
    else this.load(true);
  }

  async load(reset) {
    const generation = ++this.generation;
    if (reset) { this.cursor = null; this.count = 0; }
    this.mode = "list";
    this.setBusy(true, reset);
    try {
      const page = await this.api.listMemories({ limit: PAGE, cursor: reset ? undefined : this.cursor });
      if (generation !== this.generation) return;
      const memories = (page && page.memories) || [];
      if (reset) this.list.replaceChildren();
      for (const memory of memories) this.list.append(this.item(memory));
      this.count += memories.length;
      this.cursor = (page && page.next_cursor) || null;
      this.more.hidden = !this.cursor;
      this.describe();
    } catch (error) {
      if (generation === this.generation) this.fail(error);
    } finally {
      if (generation === this.generation) this.setBusy(false);
    }
  }

  async search(q) {
    const generation = ++this.generation;
    this.mode = "search";
    this.setBusy(true, true);
    try {
      const found = await this.api.searchMemories(q);
      if (generation !== this.generation) return;
      const memories = (found && found.memories) || [];
      this.list.replaceChildren(...memories.map((m, index) => this.item(m, index === 0 ? "best" : "related")));
      this.count = memories.length;
      this.more.hidden = true;
      this.describe(q);
    } catch (error) {
      if (generation === this.generation) this.fail(error);
    } finally {
      if (generation === this.generation) this.setBusy(false);
    }
  }

  setBusy(busy, clearing = false) {
    this.drawer.setAttribute("aria-busy", busy ? "true" : "false");
    if (busy && clearing) this.summary.textContent = "Loading…";
  }

  describe(q) {
    if (q) this.summary.textContent = this.count ? `${this.count} found for “${q}”` : `Nothing found for “${q}”`;
    else if (!this.count) this.summary.textContent = "No memories yet. Tell me something to remember.";
    else this.summary.textContent = `${this.count}${this.cursor ? "+" : ""} memor${this.count === 1 ? "y" : "ies"}`;
  }

  fail(error) {
    this.summary.textContent = "";
    this.notify(`Memories: ${error.message}`, { kind: "error" });
  }

  item(memory, match = null) {
    const li = h("li", { class: "memories__item", dataset: { memoryId: memory.memory_id } });
    const historyButton = h("button", {
      class: "btn btn--ghost btn--small", type: "button", "aria-expanded": "false",
      "aria-label": "Show the history of this memory",
      onclick: () => this.toggleHistory(memory, li, historyButton),
    }, icon("history"), h("span", {}, "History"));
    const deleteButton = h("button", {
      class: "btn btn--ghost btn--small btn--danger-text", type: "button", "aria-label": "Delete this memory",
      onclick: () => this.remove(memory, li),
    }, icon("trash"), h("span", {}, "Delete"));
    const actions = [historyButton, deleteButton];
    if (isText(memory)) {
      actions.unshift(h("button", {
        class: "btn btn--ghost btn--small", type: "button", "aria-label": "Edit this memory",
        onclick: () => this.edit(memory, li),
      }, icon("pencil"), h("span", {}, "Edit")));
    }
    li.append(memoryCard(memory, { actions, headingLevel: "h3", label: "Memory", quietLabel: true, match }));
    return li;
  }

  /** The memory's text becomes a text box; saving changes it through the API (its history
   * keeps the old text), Escape or Cancel leaves it as it was. */
  edit(memory, li) {
    if (li.querySelector(".mem__edit")) return;
    const shown = li.querySelector(".mem__content");
    // No maxlength: it would cut a long paste without a word. The counter says the limit.
    const box = h("textarea", {
      class: "mem__edit-text", dir: "auto", rows: "3", "aria-label": "The memory's text",
    });
    box.value = memory.content;
    const counter = h("p", { class: "composer__count", "aria-live": "polite", hidden: true });
    const saveButton = h("button", { class: "btn btn--primary btn--small", type: "submit" }, "Save");
    const limit = new MessageLimit({ input: box, counter, send: saveButton });
    limit.setMax(MAX_CONTENT_CHARS);
    box.addEventListener("input", () => limit.refresh());
    const cancel = () => { form.replaceWith(shown); li.querySelector("[aria-label='Edit this memory']")?.focus(); };
    const submit = (event) => {
      event.preventDefault();
      if (limit.over()) this.notify(`The memory is too long: at most ${MAX_CONTENT_CHARS.toLocaleString()} characters.`, { kind: "error", code: "too_large" });
      else this.save(memory, li, box.value);
    };
    const form = h("form", { class: "mem__edit", onsubmit: submit },
      box,
      counter,
      h("div", { class: "mem__edit-actions" },
        h("button", { class: "btn btn--ghost btn--small", type: "button", onclick: cancel }, "Cancel"),
        saveButton));
    box.addEventListener("keydown", (event) => {
      if (event.key === "Escape") { event.preventDefault(); event.stopPropagation(); cancel(); }
      if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) { event.preventDefault(); form.requestSubmit(); }
    });
    shown.replaceWith(form);
    box.focus();
    box.setSelectionRange(box.value.length, box.value.length);
  }

  async save(memory, li, text) {
    const content = text.trim();
    if (!content) {
      this.notify("A memory cannot be empty: delete it instead.", { kind: "error" });
      return;
    }
    if (content === memory.content) {
      li.replaceWith(this.item(memory));
      return;
    }
    try {
      // The memory service renames the binding that was the old text (and keeps the rest).
      const changed = await this.api.updateMemory(memory.memory_id, { content });
      const fresh = this.item(changed.memory);
      li.replaceWith(fresh);
      this.notify("Memory updated", { kind: "success" });
      fresh.querySelector("[aria-label='Edit this memory']")?.focus();
    } catch (error) {
      this.notify(`Could not save: ${error.message}`, { kind: "error" });
    }
  }

  async remove(memory, li) {
    const preview = contentText(memory.content);
    const ok = await confirmDialog({
      title: "Delete this memory?",
      text: `“${preview.length > 160 ? `${preview.slice(0, 160)}…` : preview}” will be forgotten. Its history is kept.`,
      confirmLabel: "Delete",
    });
    if (!ok) return;
    try {
      await this.api.deleteMemory(memory.memory_id);
      const next = li.nextElementSibling || li.previousElementSibling;
      li.remove();
      this.count = Math.max(0, this.count - 1);
      this.describe(this.mode === "search" ? this.query.value.trim() : undefined);
      this.notify("Memory deleted", { kind: "success" });
      const focusable = next && next.querySelector("button");
      (focusable || this.query).focus();
    } catch (error) {
      this.notify(`Could not delete: ${error.message}`, { kind: "error" });
    }
  }

  async toggleHistory(memory, li, button) {
    const open = li.querySelector(".history");
    if (open) {
      open.remove();
      button.setAttribute("aria-expanded", "false");
      return;
    }
    button.setAttribute("aria-expanded", "true");
    const box = h("div", { class: "history", "aria-live": "polite" }, h("p", { class: "history__loading" }, "Loading history…"));
    li.querySelector(".mem").append(box);
    try {
      const history = await this.api.memoryHistory(memory.memory_id);
      const changes = (history && history.changes) || [];
      box.replaceChildren(
        h("h4", { class: "history__title" }, "History"),
        changes.length ? h("ol", { class: "history__list" }, changes.map(change)) : h("p", {}, "No recorded changes."),
      );
    } catch (error) {
      box.replaceChildren(h("p", { class: "history__error" }, `Could not load the history: ${error.message}`));
    }
  }
}

function isText(memory) {
  return memory.content_kind !== "json" && typeof memory.content === "string";
}

function change(entry) {
  const content = (value) => (value && typeof value === "object" && "content" in value ? contentText(value.content) : value ? contentText(value) : "");
  const before = content(entry.old);
  const after = content(entry.new);
  return h("li", { class: `history__item history__item--${entry.kind}` },
    h("div", { class: "history__head" },
      h("span", { class: "history__kind" }, entry.kind),
      h("span", { class: "history__source" }, `via ${entry.source}`),
      h("time", { datetime: entry.at }, formatDateTime(entry.at))),
    entry.kind === "updated" && before ? h("p", { class: "history__old", dir: "auto" }, before) : null,
    entry.kind !== "deleted" && after ? h("p", { class: "history__new", dir: "auto" }, after) : null,
    entry.kind === "deleted" && before ? h("p", { class: "history__old", dir: "auto" }, before) : null);
}
