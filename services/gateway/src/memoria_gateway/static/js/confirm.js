// A modal confirmation (<dialog>): resolves true when the user confirms.

import { byId, setText } from "./dom.js";

export function confirmDialog({ title, text, confirmLabel = "Delete" }) {
  const dialog = byId("confirm");
  setText(byId("confirm-title"), title);
  setText(byId("confirm-text"), text); // may quote a memory: its invisible characters shown
  byId("confirm-ok").textContent = confirmLabel;
  dialog.returnValue = "";
  return new Promise((resolve) => {
    dialog.addEventListener("close", () => resolve(dialog.returnValue === "ok"), { once: true });
    dialog.showModal();
    byId("confirm-ok").focus();
  });
}
