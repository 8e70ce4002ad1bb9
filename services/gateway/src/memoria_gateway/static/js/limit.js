// A text box's length limit (the composer's, learned from GET /api/limits; a memory's): a
// counter once the text is close to it, and the send button off past it, so a long paste is
// never cut (as maxlength would) nor refused by surprise. The gateway counts Unicode code
// points, as this does.

const NEAR = 0.9; // the counter shows from this share of the limit on

/** Code points in `text`: a UTF-16 length over-counts only characters outside the BMP. */
export function charCount(text, max) {
  // A length within the limit cannot hold more code points: skip the exact count then.
  return text.length <= max ? text.length : [...text].length;
}

export class MessageLimit {
  constructor({ input, counter, send }) {
    this.input = input;
    this.counter = counter;
    this.send = send;
    this.max = null; // unknown until the gateway says: nothing is shown or blocked
  }

  setMax(max) {
    this.max = Number.isInteger(max) && max > 0 ? max : null;
    this.refresh();
  }

  /** How many characters the text is over the limit (0 when within it, or it is unknown). */
  over() {
    if (this.max === null) return 0;
    return Math.max(0, charCount(this.input.value, this.max) - this.max);
  }

  refresh() {
    const max = this.max;
    const count = max === null ? 0 : charCount(this.input.value, max);
    const over = max !== null && count > max;
    this.counter.hidden = max === null || count < max * NEAR;
    this.counter.classList.toggle("is-over", over);
    this.counter.textContent = max === null ? ""
      : over ? `${count.toLocaleString()} / ${max.toLocaleString()} characters: ${(count - max).toLocaleString()} over the limit, shorten it to send`
        : `${count.toLocaleString()} / ${max.toLocaleString()} characters`;
    this.send.disabled = over;
    this.input.setAttribute("aria-invalid", over ? "true" : "false");
  }
}
