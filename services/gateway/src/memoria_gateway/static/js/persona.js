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
    this.changing = false; // a switch of ours is on its way: do not show an older value
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
    if (!threadId || !this.names.size) return;
    try {
      const data = await this.api.threadConfig(threadId);
      if (this.threadId !== threadId) return; // another thread was opened meanwhile
      this.current = data.config.persona;
      this.select.value = this.current;
      this.select.disabled = false;
    } catch (_) {
      // A thread not stored yet has no config to change; the picker stays disabled.
    }
  }

  /** Reads the open thread's persona again, if ``threadId`` is still the open one. */
  async refresh(threadId) {
    if (!threadId || threadId !== this.threadId || !this.names.size || this.changing) return;
    try {
      const data = await this.api.threadConfig(threadId);
      if (this.threadId !== threadId || this.changing) return;
      this.current = data.config.persona;
      this.select.value = this.current;
      this.select.disabled = false;
    } catch (_) {
      // Unchanged: the picker keeps what it showed (it is read again next time).
    }
  }

  async change() {
    const threadId = this.threadId;
    const wanted = this.select.value;
    if (!threadId || wanted === this.current) return;
    this.select.disabled = true;
    this.changing = true;
    try {
      const data = await this.api.changeThreadConfig(threadId, { persona: wanted });
      if (this.threadId !== threadId) return;
      this.current = data.config.persona;
      this.notify(`${this.names.get(this.current) || this.current} answers from your next message.`);
    } catch (error) {
      this.select.value = this.current;
      this.notify(`Could not switch the persona: ${error.message}`, { kind: "error" });
    } finally {
      this.changing = false;
      if (this.threadId === threadId) this.select.disabled = false;
    }
  }
}
