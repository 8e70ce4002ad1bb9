// The persona picker in the thread header: lists the configured personas, shows the open
// thread's, and switches it with PATCH /api/threads/{id}/config {"persona": id}. The switch
// applies from the thread's next message, which the server opens with an identity reset.
// Another tab (or device) may switch it too: the picker reads the thread's persona again when
// one of its cycles ends and when the tab comes back into view.

import { h } from "./dom.js";

export class PersonaPicker {
  /** @param {{select: HTMLSelectElement, api: import("./api.js").Api, notify: Function}} parts */
  constructor({ select, api, notify }) {
    this.select = select;
    this.api = api;
    this.notify = notify;
    this.names = new Map();
    this.threadId = null;
    this.current = null;
    this.changing = null; // the thread a switch of ours is on its way for: not read meanwhile
    select.addEventListener("change", () => this.change());
  }

  async load() {
    try {
      const data = await this.api.listPersonas();
      const personas = (data && data.personas) || [];
      this.names = new Map(personas.map((p) => [p.id, p.name]));
      this.select.replaceChildren(...personas.map((p) => h("option", { value: p.id, title: p.description }, p.name)));
    } catch (error) {
      this.notify(`Could not load the personas: ${error.message}`, { kind: "error" });
    }
  }

  /** Shows the persona of thread ``threadId`` (disabled until it is known). */
  async show(threadId) {
    this.threadId = threadId;
    this.select.disabled = true;
    await this.refresh(threadId);
  }

  /** Reads the open thread's persona (again), if ``threadId`` is still the open one. */
  async refresh(threadId) {
    if (!threadId || threadId !== this.threadId || !this.names.size) return;
    if (this.changing === threadId) return;
    try {
      const data = await this.api.threadConfig(threadId);
      if (this.threadId !== threadId || this.changing === threadId) return;
      this.current = data.config.persona;
      this.select.value = this.current;
      this.select.disabled = false;
    } catch (_) {
      // Unchanged: a thread not stored yet has no config (its picker stays disabled); a
      // failed read again is tried at the next cycle's end.
    }
  }

  async change() {
    const threadId = this.threadId;
    const wanted = this.select.value;
    if (!threadId || wanted === this.current) return;
    this.select.disabled = true;
    this.changing = threadId;
    try {
      const data = await this.api.changeThreadConfig(threadId, { persona: wanted });
      if (this.threadId !== threadId) return;
      this.current = data.config.persona;
      this.notify(`${this.names.get(this.current) || this.current} answers from your next message.`);
    } catch (error) {
      this.select.value = this.current;
      this.notify(`Could not switch the persona: ${error.message}`, { kind: "error" });
    } finally {
      this.changing = null;
      if (this.threadId === threadId) this.select.disabled = false;
    }
  }
}
