// Dates, durations, money and token counts as people read them.

const timeFormat = new Intl.DateTimeFormat(undefined, { hour: "2-digit", minute: "2-digit" });
const dateFormat = new Intl.DateTimeFormat(undefined, { day: "numeric", month: "short", year: "numeric" });
const dateTimeFormat = new Intl.DateTimeFormat(undefined, {
  day: "numeric", month: "short", year: "numeric", hour: "2-digit", minute: "2-digit",
});

function toDate(value) {
  const date = value instanceof Date ? value : new Date(value);
  return Number.isNaN(date.getTime()) ? null : date;
}

export function formatTime(value) {
  const date = toDate(value);
  return date ? timeFormat.format(date) : "";
}

export function formatDate(value) {
  const date = toDate(value);
  return date ? dateFormat.format(date) : "";
}

export function formatDateTime(value) {
  const date = toDate(value);
  return date ? dateTimeFormat.format(date) : "";
}

/** "now", "5 min", "3 h", "yesterday", or a date. */
export function formatRelative(value, now = Date.now()) {
  const date = toDate(value);
  if (!date) return "";
  const seconds = Math.max(0, (now - date.getTime()) / 1000);
  if (seconds < 60) return "now";
  if (seconds < 3600) return `${Math.floor(seconds / 60)} min`;
  if (seconds < 86400) return `${Math.floor(seconds / 3600)} h`;
  if (seconds < 2 * 86400) return "yesterday";
  if (seconds < 7 * 86400) return `${Math.floor(seconds / 86400)} days`;
  return formatDate(date);
}

export function formatDuration(ms) {
  if (ms < 1000) return `${Math.max(0, Math.round(ms))} ms`;
  if (ms < 60000) return `${(ms / 1000).toFixed(1)} s`;
  return `${Math.floor(ms / 60000)} min ${Math.round((ms % 60000) / 1000)} s`;
}

export function formatCost(usd) {
  if (typeof usd !== "number" || !Number.isFinite(usd)) return "";
  if (usd === 0) return "$0";
  if (usd < 0.01) return `$${usd.toFixed(4)}`;
  return `$${usd.toFixed(2)}`;
}

export function formatTokens(count) {
  if (typeof count !== "number") return "";
  return count >= 1000 ? `${(count / 1000).toFixed(1)}k` : String(count);
}

/** A memory's content as text: strings as they are, JSON pretty-printed. */
export function contentText(content) {
  if (typeof content === "string") return content;
  try {
    return JSON.stringify(content, null, 2);
  } catch (_) {
    return String(content);
  }
}

export function humanize(identifier) {
  return String(identifier ?? "").replace(/_/g, " ");
}
