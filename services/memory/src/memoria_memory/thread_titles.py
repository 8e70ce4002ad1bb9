"""What a thread list shows of a thread's messages: a title made from the first user message,
and a preview of the newest message."""

from __future__ import annotations

import json
from typing import Any, Final

from memoria_contracts.chat import Modal
from memoria_contracts.threads import MAX_LAST_MESSAGE_CHARS

MAX_DEFAULT_TITLE_CHARS: Final = 60
ELLIPSIS: Final = "…"
# Trailing punctuation looks odd before an ellipsis ("Plan the trip,…").
_TRAILING: Final = " \t,;:.-–—"


def default_title(first_user_message: Any) -> str | None:
    """The first user message on one line, cut on a word boundary to at most 60 characters
    (ellipsis included); None when there is no text to make a title of."""
    if not isinstance(first_user_message, str):
        return None
    text = " ".join(first_user_message.split())
    if not text:
        return None
    if len(text) <= MAX_DEFAULT_TITLE_CHARS:
        return text
    room = MAX_DEFAULT_TITLE_CHARS - len(ELLIPSIS)
    cut = text[:room]
    if text[room] != " ":
        boundary = cut.rfind(" ")
        # A single very long word (a URL) is cut where it must be rather than dropped.
        if boundary >= room // 2:
            cut = cut[:boundary]
    return cut.rstrip(_TRAILING) + ELLIPSIS


def preview(modal: Modal, content: Any) -> str | None:
    """The newest message as a thread list shows it: its text, cut to 200 characters. A
    memory shown in the chat previews as the memory's own content."""
    if content is None:
        return None
    if modal == "memory" and isinstance(content, dict) and "content" in content:
        content = content["content"]
    text = content if isinstance(content, str) else json.dumps(content, ensure_ascii=False)
    if len(text) <= MAX_LAST_MESSAGE_CHARS:
        return text
    return text[: MAX_LAST_MESSAGE_CHARS - len(ELLIPSIS)] + ELLIPSIS
