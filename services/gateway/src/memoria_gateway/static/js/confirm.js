// A modal confirmation (<dialog>): resolves true when the user confirms.

import { byId } from "./dom.js";

export function confirmDialog({ title, text, confirmLabel = "Delete" }) {
  const dialog = byId("confirm");
  byId("confirm-title").textContent = title;
  byId("confirm-text").textContent = text;
  byId("confirm-ok").textContent = confirmLabel;
  dialog.returnValue = "";
  return new Promise((resolve) => {
    dialog.addEventListener("close", () => resolve(dialog.returnValue === "ok"), { once: true });
    dialog.showModal();
    byId("confirm-ok").focus();
  });
}
