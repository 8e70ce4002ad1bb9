// Sending a message again when the gateway said "not now" rather than "no" (docs/protocol.md;
// `memoria chat` does the same, cli/.../chat/resend.py). `rate_limited` says how long to wait
// (`retry_after`); `broker_unavailable` means nothing was queued, so back off and try again.
// The frame keeps its client id, so the gateway takes it at most once. Every other refusal
// would be refused again, and is final.

const RATE_LIMITED_TRIES = 20; // a burst of pasted lines goes on at the allowed pace
const BROKER_DELAYS_S = [1, 2, 4, 8, 16]; // about half a minute: longer than a broker restart
const DEFAULT_WAIT_S = 1; // a refusal that names no wait (a gateway older than the field)
const MAX_WAIT_S = 60;

/**
 * Seconds to wait before sending a frame again after `reply`, its `refusals`-th refusal in a
 * row (from 1); null when the refusal is final.
 */
export function resendDelay(reply, refusals) {
  if (!reply || reply.type !== "error") return null;
  if (reply.code === "rate_limited" && refusals < RATE_LIMITED_TRIES) {
    const wait = reply.retry_after;
    if (typeof wait !== "number" || !Number.isFinite(wait)) return DEFAULT_WAIT_S;
    return Math.min(Math.max(wait, 0), MAX_WAIT_S);
  }
  if (reply.code === "broker_unavailable" && refusals <= BROKER_DELAYS_S.length) {
    return BROKER_DELAYS_S[refusals - 1];
  }
  return null;
}
