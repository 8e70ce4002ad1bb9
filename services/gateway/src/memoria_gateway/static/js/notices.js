// Dismissible notices above the composer: errors stay until dismissed, the rest fade out.

import { h, icon } from "./dom.js";

let region = null;

export function initNotices(element) {
  region = element;
}

export function notify(text, { kind = "info", timeout = kind === "error" ? 0 : 4000, code = null } = {}) {
  if (!region) return null;
  const notice = h("div", { class: `notice notice--${kind}`, role: kind === "error" ? "alert" : "status", dataset: code ? { code } : {} },
    icon(kind === "error" ? "alert" : "check"),
    h("span", { class: "notice__text" }, text));
  const dismiss = () => notice.remove();
  notice.append(h("button", { class: "icon-btn notice__close", type: "button", "aria-label": "Dismiss", onclick: dismiss }, icon("close")));
  region.append(notice);
  while (region.childElementCount > 4) region.firstElementChild.remove();
  if (timeout) setTimeout(dismiss, timeout);
  return notice;
}

export function clearNotices() {
  if (region) region.replaceChildren();
}
