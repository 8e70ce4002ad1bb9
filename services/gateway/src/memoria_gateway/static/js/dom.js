// Building DOM nodes without HTML strings: text always becomes Text nodes, so nothing a
// model, a memory or a user wrote can ever become markup, and every character that would
// show as nothing shows as what it is (visible()).

const SVG_NS = "http://www.w3.org/2000/svg";

// Format and direction-control characters that show as nothing: zero-width spaces and
// joiners, direction marks, embeddings, overrides and isolates, the BOM. Stored as sent,
// shown as a marked code point ("⟨U+202E⟩"), so that "my pin is \u202e1234" cannot read
// "my pin is 4321" and two texts that look alike are told apart. A joiner between two emoji
// is part of the emoji (a family, a profession) and stays. `memoria chat` shows them alike.
const INVISIBLE = /[\u200B-\u200F\u202A-\u202E\u2066-\u2069\uFEFF]/u;
const EVERY_INVISIBLE = new RegExp(INVISIBLE.source, "gu");
const PICTOGRAPHIC = /^\p{Extended_Pictographic}$/u;
const ZWJ = "\u200D";
const NAMES = {
  "200B": "zero width space", "200C": "zero width non-joiner", "200D": "zero width joiner",
  "200E": "left-to-right mark", "200F": "right-to-left mark",
  "202A": "left-to-right embedding", "202B": "right-to-left embedding",
  "202C": "pop directional formatting", "202D": "left-to-right override",
  "202E": "right-to-left override", "2066": "left-to-right isolate",
  "2067": "right-to-left isolate", "2068": "first strong isolate",
  "2069": "pop directional isolate", "FEFF": "zero width no-break space (BOM)",
};

function codePoint(char) {
  return char.codePointAt(0).toString(16).toUpperCase().padStart(4, "0");
}

/** The whole character (a surrogate pair counts as one) ending just before `index`. */
function charBefore(text, index) {
  const cut = text.slice(0, index);
  return cut ? [...cut.slice(-2)].at(-1) : "";
}

function joinsEmoji(text, index) {
  let before = charBefore(text, index);
  if (before === "\uFE0F") before = charBefore(text, index - 1);
  const after = String.fromCodePoint(text.codePointAt(index + 1) ?? 0);
  return PICTOGRAPHIC.test(before) && PICTOGRAPHIC.test(after);
}

/** The marker a character that shows as nothing is shown as. */
export function mark(char) {
  const code = codePoint(char);
  return h("span", {
    class: "invisible-char",
    title: `U+${code} ${NAMES[code] || "invisible character"}: shown so that it cannot change how the text reads`,
  }, `⟨U+${code}⟩`);
}

/** `text` as a node, each invisible character (INVISIBLE) shown as its marker. */
export function visible(text) {
  const value = String(text);
  if (!INVISIBLE.test(value)) return document.createTextNode(value);
  const fragment = document.createDocumentFragment();
  let from = 0;
  for (const found of value.matchAll(EVERY_INVISIBLE)) {
    const at = found.index;
    if (found[0] === ZWJ && joinsEmoji(value, at)) continue;
    if (at > from) fragment.append(value.slice(from, at));
    fragment.append(mark(found[0]));
    from = at + found[0].length;
  }
  if (from < value.length) fragment.append(value.slice(from));
  return fragment;
}

/** `text` as a string, each invisible character written as its marker's text (for the
 *  document title and attributes, which hold no elements). */
export function shownText(text) {
  return visible(text).textContent;
}

/** Set a node's text, shown as visible() shows it. */
export function setText(node, text) {
  node.replaceChildren(visible(text));
  return node;
}

/**
 * h("button", {class: "btn", type: "button", onclick: fn, "aria-label": "Close"}, "text", node)
 * Attributes: `class`, `text`, `style` (CSS text), `dataset` (object), `on<event>`
 * (function), `hidden`/boolean attributes (true/false); everything else goes through
 * setAttribute.
 */
export function h(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === null || value === undefined || value === false) continue;
    if (key === "class") node.className = value;
    else if (key === "text") setText(node, value);
    // Through the CSSOM: the page's Content-Security-Policy refuses style attributes.
    else if (key === "style") node.style.cssText = String(value);
    else if (key === "dataset") Object.assign(node.dataset, value);
    else if (key.startsWith("on") && typeof value === "function") node.addEventListener(key.slice(2), value);
    else if (value === true) node.setAttribute(key, "");
    else node.setAttribute(key, String(value));
  }
  append(node, children);
  return node;
}

/** Appends strings (as text), nodes and arrays of them; skips null, undefined and false. */
export function append(parent, children) {
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    parent.append(child instanceof Node ? child : visible(child));
  }
  return parent;
}

/** An icon from the sprite in index.html. */
export function icon(name, className = "") {
  const svg = document.createElementNS(SVG_NS, "svg");
  svg.setAttribute("aria-hidden", "true");
  svg.setAttribute("focusable", "false");
  if (className) svg.setAttribute("class", className);
  const use = document.createElementNS(SVG_NS, "use");
  use.setAttribute("href", `#i-${name}`);
  svg.append(use);
  return svg;
}

export const byId = (id) => document.getElementById(id);
