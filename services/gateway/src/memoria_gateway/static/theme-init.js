// The saved theme ("light" or "dark"), applied before the first paint. Without a saved
// choice the page follows prefers-color-scheme (style.css).
try {
  const saved = localStorage.getItem("memoria.theme");
  if (saved === "light" || saved === "dark") document.documentElement.dataset.theme = saved;
} catch (_) { /* storage disabled: follow the system */ }
