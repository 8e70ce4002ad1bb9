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
  return claim(token, "sub");
}

/** The `name` claim (the name typed at the dev login), for display only. */
export function tokenName(token) {
  return claim(token, "name");
}

function claim(token, key) {
  try {
    const payload = token.split(".")[1].replace(/-/g, "+").replace(/_/g, "/");
    const bytes = Uint8Array.from(atob(payload.padEnd(payload.length + ((4 - (payload.length % 4)) % 4), "=")), (c) => c.charCodeAt(0));
    const json = JSON.parse(new TextDecoder().decode(bytes)); // UTF-8: names need not be ASCII
    return typeof json[key] === "string" ? json[key] : null;
  } catch (_) {
    return null;
  }
}
