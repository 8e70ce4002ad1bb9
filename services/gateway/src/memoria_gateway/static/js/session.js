// Who is logged in: the token lives in sessionStorage (gone when the tab closes); the theme
// preference lives in localStorage (theme.js).

const KEY = "memoria.session";

export function loadSession() {
  try {
    const saved = JSON.parse(sessionStorage.getItem(KEY) || "null");
    if (saved && typeof saved.token === "string" && saved.token) return saved;
  } catch (_) { /* corrupt or disabled storage: log in again */ }
  return null;
}

export function saveSession(session) {
  try {
    sessionStorage.setItem(KEY, JSON.stringify(session));
  } catch (_) { /* the session then lasts as long as the page */ }
}

export function clearSession() {
  try {
    sessionStorage.removeItem(KEY);
  } catch (_) { /* nothing saved */ }
}

/** The `sub` claim of a JWT, for display only (the server never trusts the client's word). */
export function tokenSubject(token) {
  try {
    const payload = token.split(".")[1].replace(/-/g, "+").replace(/_/g, "/");
    const json = JSON.parse(atob(payload.padEnd(payload.length + ((4 - (payload.length % 4)) % 4), "=")));
    return typeof json.sub === "string" ? json.sub : null;
  } catch (_) {
    return null;
  }
}
