// A memory as a card: type badge, content, how well it matched a search (in words: "best
// match", "related"; the score itself stays in the API), what an update replaced, created
// date, and its bindings behind a disclosure. Used in the chat (memories found, saved or
// updated by a cycle) and in the memories panel. Content is always text here (JSON is
// pretty-printed), never markup.

import { h, icon } from "./dom.js";
import { contentText, formatDate, formatDateTime, humanize } from "./format.js";

export function memoryCard(memory, { actions = [], headingLevel = "h4", label = "Memory", quietLabel = false, match = null, replaced } = {}) {
  const isMemory = memory && typeof memory === "object" && !Array.isArray(memory) && "content" in memory;
  const data = isMemory ? memory : { content: memory };
  const type = data.memory_type || "memory";
  const text = contentText(data.content);
  const json = data.content_kind === "json" || (typeof data.content === "object" && data.content !== null);

  const head = h("header", { class: "mem__head" },
    h("span", { class: "mem__icon" }, icon("brain")),
    h(headingLevel, { class: quietLabel ? "mem__label visually-hidden" : "mem__label" }, label),
    h("span", { class: `badge badge--${String(type).replace(/[^a-z_]/g, "")}` }, humanize(type)),
    relevance(match, data.relevance_score),
  );
  const body = json
    ? h("pre", { class: "mem__content mem__content--json", dir: "auto" }, text)
    : h("p", { class: "mem__content", dir: "auto" }, text);
  const before = replaced === undefined || replaced === null
    ? null
    : h("p", { class: "mem__replaced" }, h("span", { class: "mem__replaced-label" }, wordsFor("was")), " ",
      h("del", { dir: "auto" }, contentText(replaced)));

  const details = h("dl", { class: "mem__facts" });
  if (Array.isArray(data.bindings) && data.bindings.length) {
    details.append(
      h("dt", {}, "Bindings"),
      h("dd", {}, h("ul", { class: "mem__bindings" }, data.bindings.map((b) => h("li", { class: "tag", dir: "auto" }, String(b))))),
    );
  }
  if (data.creation_datetime) details.append(h("dt", {}, "Created"), h("dd", {}, h("time", { datetime: data.creation_datetime }, formatDateTime(data.creation_datetime))));
  if (data.updated_at) details.append(h("dt", {}, "Updated"), h("dd", {}, h("time", { datetime: data.updated_at }, formatDateTime(data.updated_at))));
  if (data.last_accessed) details.append(h("dt", {}, "Last used"), h("dd", {}, h("time", { datetime: data.last_accessed }, formatDateTime(data.last_accessed))));
  if (data.memory_id) details.append(h("dt", {}, "Id"), h("dd", {}, h("code", {}, data.memory_id)));

  const created = data.creation_datetime
    ? h("time", { class: "mem__date", datetime: data.creation_datetime, title: formatDateTime(data.creation_datetime) }, formatDate(data.creation_datetime))
    : null;
  head.append(created || "");
  const disclosure = details.childElementCount
    ? h("details", { class: "mem__more" }, h("summary", {}, bindingSummary(data.bindings)), details)
    : null;

  return h("article", { class: "mem", dataset: data.memory_id ? { memoryId: data.memory_id } : {} },
    head,
    body,
    before,
    disclosure,
    actions.length ? h("div", { class: "mem__actions" }, actions) : null,
  );
}

function bindingSummary(bindings) {
  const count = Array.isArray(bindings) ? bindings.length : 0;
  return count ? `${count} binding${count === 1 ? "" : "s"} · details` : "Details";
}

// Words people read right, in the page's language: a small percentage read as "weak" for the
// right answer, whose calibrated probability is often 0.1-0.4 (docs/relevance.md).
const WORDS = {
  en: { best: "best match", related: "related", was: "Was:" },
  pt: { best: "melhor resultado", related: "relacionada", was: "Antes:" },
};

export function wordsFor(key) {
  // The reader's language where the page has those words (English and Portuguese).
  const language = (navigator.language || document.documentElement.lang || "en").slice(0, 2).toLowerCase();
  return (WORDS[language] || WORDS.en)[key];
}

function relevance(match, score) {
  // A search's first card is its best match; any other scored card is related to the search.
  const kind = match || (typeof score === "number" && Number.isFinite(score) ? "related" : null);
  if (!kind) return null;
  return h("span", { class: `relevance relevance--${kind}` }, wordsFor(kind));
}
