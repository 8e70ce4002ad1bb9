"""Chat threads: what the memory service keeps about each (user, thread) beside its history —
title, dates, message count, last message — and the requests that list, create and rename
them, with their replies.

Like every request to the memory service, none of these names a user: the user is the
envelope's, which comes from the authenticated session only.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Final, Literal

from pydantic import Field, StringConstraints

from memoria_contracts.base import ContractModel, FailureReply, SuccessReply
from memoria_contracts.text import TrimmedText

ThreadId = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9._-]{1,64}$")]

MAX_TITLE_CHARS: Final = 120
DEFAULT_THREAD_TITLE: Final = "New chat"
DEFAULT_THREAD_PAGE: Final = 50
MAX_THREAD_PAGE: Final = 200
MAX_LAST_MESSAGE_CHARS: Final = 200

ThreadTitle = Annotated[str, TrimmedText(MAX_TITLE_CHARS)]
"""A title someone chose: 1 to 120 characters once the surrounding blanks are gone, no
control character."""

ThreadFailureCode = Literal["not_found", "invalid"]
"""``invalid``: a change the thread cannot take (a persona that is not configured)."""


class Thread(ContractModel):
    """A conversation as a thread list shows it."""

    thread_id: ThreadId
    title: str = Field(
        description="The chosen title; else the first user message, shortened; else "
        f"'{DEFAULT_THREAD_TITLE}'."
    )
    created_at: datetime
    updated_at: datetime = Field(description="When the thread's newest message was written.")
    message_count: int = Field(ge=0, description="Stored messages (status lines never are).")
    last_message: str | None = Field(
        description=f"The newest stored message, cut to {MAX_LAST_MESSAGE_CHARS} characters."
    )


# -- requests -------------------------------------------------------------------------------


class ThreadList(ContractModel):
    """The user's threads, most recently updated first."""

    type: Literal["thread.list"] = "thread.list"
    limit: int = Field(default=DEFAULT_THREAD_PAGE, ge=1, le=MAX_THREAD_PAGE)


class ThreadCreate(ContractModel):
    """Create a thread under an id the caller made up (so a retried request finds the same
    thread instead of making a second one)."""

    type: Literal["thread.create"] = "thread.create"
    thread_id: ThreadId
    title: ThreadTitle | None = Field(
        default=None, description="Unset: named after its first user message, once it has one."
    )


class ThreadRename(ContractModel):
    type: Literal["thread.rename"] = "thread.rename"
    thread_id: ThreadId
    title: ThreadTitle


# -- replies --------------------------------------------------------------------------------


class ThreadPage(SuccessReply):
    type: Literal["thread.page"] = "thread.page"
    threads: list[Thread]


class ThreadSaved(SuccessReply):
    type: Literal["thread.saved"] = "thread.saved"
    created: bool = Field(description="False for a rename, or a create that had happened.")
    thread: Thread


class ThreadFailure(FailureReply):
    """``not_found`` is also the answer for another user's thread of the same id."""

    type: Literal["thread.failure"] = "thread.failure"
    code: ThreadFailureCode
    thread_id: str | None = None


ThreadRequest = ThreadList | ThreadCreate | ThreadRename
ThreadReply = ThreadPage | ThreadSaved | ThreadFailure
