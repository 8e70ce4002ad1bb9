// Light and dark: the system's choice until the user picks one, which is remembered.

const KEY = "memoria.theme";
const dark = window.matchMedia("(prefers-color-scheme: dark)");

export function currentTheme() {
  const chosen = document.documentElement.dataset.theme;
  if (chosen === "light" || chosen === "dark") return chosen;
  return dark.matches ? "dark" : "light";
}

function label() {
  const next = currentTheme() === "dark" ? "light" : "dark";
  for (const button of document.querySelectorAll("[data-theme-toggle]")) {
    button.setAttribute("aria-label", `Switch to ${next} theme`);
    button.title = `Switch to ${next} theme`;
  }
}

export function setTheme(theme) {
  document.documentElement.dataset.theme = theme;
  try {
    localStorage.setItem(KEY, theme);
  } catch (_) { /* remembered for this page only */ }
  label();
}

export function initTheme() {
  for (const button of document.querySelectorAll("[data-theme-toggle]")) {
    button.addEventListener("click", () => setTheme(currentTheme() === "dark" ? "light" : "dark"));
  }
  dark.addEventListener("change", label);
  label();
}
