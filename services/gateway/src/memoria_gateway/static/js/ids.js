// Client message ids (`^[A-Za-z0-9_-]{8,64}$`, docs/protocol.md): they make a resend after a
// reconnect safe, the server accepts each id once. getRandomValues works on plain http too.

export function clientId(prefix = "c") {
  const bytes = new Uint8Array(12);
  crypto.getRandomValues(bytes);
  const random = Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
  return `${prefix}_${Date.now().toString(36)}${random}`;
}
