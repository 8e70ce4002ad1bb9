// Building DOM nodes without HTML strings: text always becomes Text nodes, so nothing a
// model, a memory or a user wrote can ever become markup.

const SVG_NS = "http://www.w3.org/2000/svg";

/**
 * h("button", {class: "btn", type: "button", onclick: fn, "aria-label": "Close"}, "text", node)
 * Attributes: `class`, `text`, `dataset` (object), `on<event>` (function), `hidden`/boolean
 * attributes (true/false); everything else goes through setAttribute.
 */
export function h(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === null || value === undefined || value === false) continue;
    if (key === "class") node.className = value;
    else if (key === "text") node.textContent = String(value);
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
    parent.append(child instanceof Node ? child : document.createTextNode(String(child)));
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
