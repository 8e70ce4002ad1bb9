// A small, safe Markdown renderer for model output: the text is never parsed as HTML. It is
// cut into blocks and inline spans, and every piece of text becomes a Text node, so "<img
// onerror=…>" or "<script>" in an answer shows as those characters and nothing else.
//
// Supported: paragraphs and line breaks, # headings, **bold**, *italic*, ~~strike~~,
// `code`, fenced code blocks, - / 1. lists (nested by indentation), > quotes, --- rules,
// [links](https://…) and bare https:// URLs. Links must be http(s); they open in a new tab
// with rel="noopener noreferrer". Anything else stays literal text.

import { h, visible } from "./dom.js";

const FENCE = /^ {0,3}(`{3,}|~{3,})[ \t]*([\w.+#-]*)[ \t]*$/;
const HEADING = /^ {0,3}(#{1,6})[ \t]+(.*)$/;
const RULE = /^ {0,3}([-*_])(?:[ \t]*\1){2,}[ \t]*$/;
const ITEM = /^( *)([-*+]|\d{1,9}[.)])[ \t]+(.*)$/;
const QUOTE = /^ {0,3}>[ \t]?(.*)$/;
const LINK = /\[([^\]\n]{1,500})\]\([ \t]*<?(https?:\/\/[^\s<>()]+(?:\([^\s<>()]*\)[^\s<>()]*)*)>?[ \t]*\)/y;
const BARE_URL = /https?:\/\/[^\s<>"'`]+/y;
const ESCAPABLE = "\\`*_{}[]()#+-.!~>|<";
const MAX_DEPTH = 6;
const MAX_INLINE_CHARS = 20000;

export function renderMarkdown(source) {
  const fragment = document.createDocumentFragment();
  const text = String(source ?? "").replace(/\r\n?/g, "\n");
  fragment.append(...blocks(text.split("\n"), 0));
  return fragment;
}

/** Text with inline formatting only (no blocks), e.g. for a one-line preview. */
export function renderInline(source) {
  const fragment = document.createDocumentFragment();
  fragment.append(...inline(String(source ?? ""), 0));
  return fragment;
}

function blocks(lines, depth) {
  const out = [];
  let i = 0;
  while (i < lines.length) {
    const line = lines[i];
    if (!line.trim()) { i += 1; continue; }

    const fence = FENCE.exec(line);
    if (fence) {
      const marker = fence[1];
      const body = [];
      i += 1;
      while (i < lines.length && !isClosingFence(lines[i], marker)) body.push(lines[i++]);
      i += 1; // the closing fence (or the end of the text)
      const code = h("code", fence[2] ? { "data-lang": fence[2] } : {}, body.join("\n"));
      out.push(h("pre", { class: "md-code" }, code));
      continue;
    }
    const heading = HEADING.exec(line);
    if (heading) {
      const level = Math.min(6, heading[1].length + 2); // # → h3: answers are not pages
      out.push(h(`h${level}`, { class: "md-heading" }, inline(heading[2].replace(/[ \t]+#+[ \t]*$/, ""), depth)));
      i += 1;
      continue;
    }
    if (RULE.test(line)) { out.push(h("hr")); i += 1; continue; }
    if (QUOTE.test(line) && depth < MAX_DEPTH) {
      const inner = [];
      while (i < lines.length && QUOTE.test(lines[i])) inner.push(QUOTE.exec(lines[i++])[1]);
      out.push(h("blockquote", {}, blocks(inner, depth + 1)));
      continue;
    }
    if (ITEM.test(line) && depth < MAX_DEPTH) {
      const list = parseList(lines, i, depth);
      out.push(list.node);
      i = list.next;
      continue;
    }
    const paragraph = [];
    while (i < lines.length && lines[i].trim() && !(paragraph.length && startsBlock(lines[i]))) paragraph.push(lines[i++]);
    out.push(h("p", {}, joinLines(paragraph.map((l) => l.trim()), depth)));
  }
  return out;
}

function isClosingFence(line, marker) {
  const trimmed = line.trim();
  return trimmed.length >= marker.length && trimmed[0] === marker[0] && /^(`+|~+)$/.test(trimmed);
}

function startsBlock(line) {
  return FENCE.test(line) || HEADING.test(line) || RULE.test(line) || QUOTE.test(line) || ITEM.test(line);
}

function itemOf(line) {
  const match = ITEM.exec(line);
  if (!match) return null;
  const ordered = /\d/.test(match[2][0]);
  return {
    indent: match[1].length,
    ordered,
    number: ordered ? parseInt(match[2], 10) : null,
    text: match[3],
    offset: match[0].length - match[3].length,
  };
}

function parseList(lines, start, depth) {
  const first = itemOf(lines[start]);
  const items = [];
  let current = null;
  let loose = false;
  let i = start;
  while (i < lines.length) {
    const line = lines[i];
    const item = itemOf(line);
    if (item && item.indent < first.indent + 2) {
      if (item.ordered !== first.ordered) break;
      current = { lines: [item.text], offset: item.offset };
      items.push(current);
      i += 1;
      continue;
    }
    if (!line.trim()) {
      let next = i + 1;
      while (next < lines.length && !lines[next].trim()) next += 1;
      if (next >= lines.length) break;
      const after = itemOf(lines[next]);
      const continues = (after && after.indent < first.indent + 2 && after.ordered === first.ordered)
        || leading(lines[next]) > first.indent + 1;
      if (!continues) break;
      loose = true;
      current.lines.push("");
      i += 1;
      continue;
    }
    const lead = leading(line);
    if (lead > first.indent + 1) {
      current.lines.push(line.slice(Math.min(lead, current.offset)));
      i += 1;
      continue;
    }
    const previous = current.lines[current.lines.length - 1];
    if (previous && previous.trim() && !startsBlock(line)) { // a lazy continuation line
      current.lines.push(line.trim());
      i += 1;
      continue;
    }
    break;
  }
  const attrs = first.ordered && first.number !== 1 ? { start: first.number } : {};
  const list = h(first.ordered ? "ol" : "ul", attrs);
  for (const item of items) {
    const content = blocks(item.lines, depth + 1);
    const li = h("li");
    if (!loose && content[0] && content[0].tagName === "P") {
      li.append(...content[0].childNodes);
      li.append(...content.slice(1));
    } else {
      li.append(...content);
    }
    list.append(li);
  }
  return { node: list, next: i };
}

function leading(line) {
  return line.length - line.trimStart().length;
}

function joinLines(lines, depth) {
  const out = [];
  lines.forEach((line, index) => {
    if (index) out.push(h("br"));
    out.push(...inline(line, depth));
  });
  return out;
}

function isSpace(ch) {
  return ch === undefined || /\s/.test(ch);
}

function isWordChar(ch) {
  return ch !== undefined && /[\p{L}\p{N}]/u.test(ch);
}

/** Index of the closing `marker` for an opener ending at `from`, or -1. */
function closer(text, marker, from) {
  const single = marker.length === 1;
  let at = text.indexOf(marker, from);
  while (at !== -1) {
    const before = text[at - 1];
    const after = text[at + marker.length];
    const ok = at > from && !isSpace(before)
      && !(single && (after === marker || before === marker))
      && !(marker[0] === "_" && isWordChar(after));
    if (ok) return at;
    at = text.indexOf(marker, at + 1);
  }
  return -1;
}

export function safeUrl(raw) {
  try {
    const url = new URL(raw);
    return url.protocol === "http:" || url.protocol === "https:" ? url.href : null;
  } catch (_) {
    return null;
  }
}

function link(href, children) {
  return h("a", { href, target: "_blank", rel: "noopener noreferrer" }, children);
}

function inline(text, depth, allowLinks = true) {
  if (depth > MAX_DEPTH || text.length > MAX_INLINE_CHARS) return [visible(text)];
  const out = [];
  let buffer = "";
  const flush = () => {
    if (buffer) out.push(visible(buffer));
    buffer = "";
  };
  let i = 0;
  while (i < text.length) {
    const ch = text[i];

    if (ch === "\\" && ESCAPABLE.includes(text[i + 1] ?? "\n")) {
      buffer += text[i + 1];
      i += 2;
      continue;
    }

    if (ch === "`") {
      let run = 1;
      while (text[i + run] === "`") run += 1;
      const fence = "`".repeat(run);
      const end = text.indexOf(fence, i + run);
      if (end !== -1) {
        flush();
        let code = text.slice(i + run, end);
        if (code.length > 2 && code.startsWith(" ") && code.endsWith(" ")) code = code.slice(1, -1);
        out.push(h("code", {}, code));
        i = end + run;
      } else {
        buffer += fence;
        i += run;
      }
      continue;
    }

    if (ch === "*" || ch === "_" || ch === "~") {
      const double = text[i + 1] === ch;
      const marker = double ? ch + ch : ch;
      const opensWord = !(ch === "_" && isWordChar(text[i - 1]));
      if ((ch !== "~" || double) && opensWord && !isSpace(text[i + marker.length])) {
        const end = closer(text, marker, i + marker.length);
        if (end !== -1) {
          flush();
          const tag = ch === "~" ? "del" : double ? "strong" : "em";
          out.push(h(tag, {}, inline(text.slice(i + marker.length, end), depth + 1, allowLinks)));
          i = end + marker.length;
          continue;
        }
      }
      buffer += marker;
      i += marker.length;
      continue;
    }

    if (ch === "[" && allowLinks) {
      LINK.lastIndex = i;
      const match = LINK.exec(text);
      const href = match && safeUrl(match[2]);
      if (href) {
        flush();
        out.push(link(href, inline(match[1], depth + 1, false)));
        i = LINK.lastIndex;
        continue;
      }
    }

    if (ch === "h" && allowLinks && (text.startsWith("http://", i) || text.startsWith("https://", i)) && !isWordChar(text[i - 1])) {
      BARE_URL.lastIndex = i;
      const match = BARE_URL.exec(text);
      let raw = match ? match[0] : "";
      raw = raw.replace(/[.,;:!?'"*_~]+$/, "");
      while (raw.endsWith(")") && (raw.match(/\(/g) || []).length < (raw.match(/\)/g) || []).length) raw = raw.slice(0, -1);
      const href = raw && safeUrl(raw);
      if (href) {
        flush();
        out.push(link(href, [raw]));
        i += raw.length;
        continue;
      }
    }

    buffer += ch;
    i += 1;
  }
  flush();
  return out;
}
