"""The web chat at `/`, driven in a real chromium against the real stack (broker, milvus-lite,
the four services as processes; the offline planner answers). What a user does: log in,
chat, watch a cycle run, find memories, manage them, switch and rename threads, lose the
connection, pick a theme. Screenshots are kept as artifacts (conftest.py says where)."""

from __future__ import annotations

import asyncio
import json
import re
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import (
    Browser,
    BrowserContext,
    Locator,
    Page,
    ViewportSize,
    WebSocketRoute,
    expect,
)
from stack import Stack, running_stack
from ws_client import chat

pytestmark = [pytest.mark.browser, pytest.mark.integration, pytest.mark.timeout(600)]

OFFLINE_BADGE = "offline · no model"
HOSTILE = "My favourite snack is <img src=x onerror=alert(1)> <script>alert(2)</script>"
STORE_TIMEOUT_S = 30.0
LIGHT_BG = "rgb(247, 247, 249)"
DARK_BG = "rgb(16, 16, 20)"
DESKTOP: ViewportSize = {"width": 1280, "height": 800}
PHONE: ViewportSize = {"width": 390, "height": 844}
MAX_MESSAGE_CHARS = 500  # small, so that the page can provoke a `too_large` refusal
SOCKETS_PER_USER = 2  # small, so that a third tab of one user is refused
HISTORY_PAGE = 100  # messages the page loads at a time (HISTORY_PAGE in app.js)
LONG_THREAD_CYCLES = 60  # a user message and an answer each: more than a page
TIMEOUT_MS = 30_000  # generous: the machine running this may be slow and shared

# Records what flashes by too fast to assert while it is on screen: every status line shown,
# whether a bubble was ever streaming, every state of the connection indicator.
RECORDER = """
window.__seen = { statuses: [], streamed: false, connection: [] };
new MutationObserver(() => {
  const seen = window.__seen;
  const row = document.querySelector("#messages .status-row__text");
  const text = row && row.textContent;
  if (text && seen.statuses[seen.statuses.length - 1] !== text) seen.statuses.push(text);
  if (document.querySelector("#messages .msg.is-streaming")) seen.streamed = true;
  const pill = document.getElementById("connection");
  const state = pill && pill.dataset.state;
  if (state && seen.connection[seen.connection.length - 1] !== state) seen.connection.push(state);
}).observe(document, { subtree: true, childList: true, characterData: true, attributes: true });
"""


@pytest.fixture(scope="module")
def stack(
    browser: Browser,  # first: no stack is started when the suite is skipped
    valkey_server: Any,
    milvus_server: Any,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Stack]:
    redis_url = f"redis://127.0.0.1:{valkey_server.port}/11"
    data_dir: Path = tmp_path_factory.mktemp("browser-stack")
    with running_stack(
        redis_url,
        milvus_server.uri,
        data_dir,
        {"rules": []},
        llm_provider="offline",
        max_message_chars=str(MAX_MESSAGE_CHARS),
        ws_max_sockets_per_user=str(SOCKETS_PER_USER),
        # A test fills a long thread from one socket; no test here is about the rate limits.
        ws_burst="1000",
        ws_messages_per_minute="100000",
        ws_user_messages_per_minute="100000",
    ) as running:
        running.wait_ready(actions=6)
        yield running


class Tab:
    """A page of the web chat and what went wrong in it (uncaught errors, alert dialogs)."""

    def __init__(self, page: Page) -> None:
        self.page = page
        self.errors: list[str] = []
        self.dialogs: list[str] = []
        page.on("pageerror", lambda error: self.errors.append(str(error)))
        page.on("console", self._console)
        page.on("dialog", self._dialog)

    def _console(self, message: Any) -> None:
        # The page runs under its Content-Security-Policy: anything it refuses is a bug.
        if "Content Security Policy" in message.text:
            self.errors.append(message.text)

    def _dialog(self, dialog: Any) -> None:
        self.dialogs.append(f"{dialog.type}: {dialog.message}")
        dialog.dismiss()


@pytest.fixture
def context(browser: Browser) -> Iterator[BrowserContext]:
    created = browser.new_context(viewport=DESKTOP, color_scheme="light")
    created.set_default_timeout(TIMEOUT_MS)
    try:
        yield created
    finally:
        created.close()


@pytest.fixture
def tab(context: BrowserContext, artifacts: Path, request: pytest.FixtureRequest) -> Iterator[Tab]:
    opened = Tab(context.new_page())
    yield opened
    report = getattr(request.node, "report_call", None)
    if report is not None and report.failed:
        name = re.sub(r"[^A-Za-z0-9_.-]+", "_", request.node.name)
        opened.page.screenshot(path=str(artifacts / f"FAILED-{name}.png"), full_page=True)
    assert not opened.errors, f"uncaught errors in the page: {opened.errors}"
    assert not opened.dialogs, f"the page opened dialogs (injected script?): {opened.dialogs}"


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def headers(stack: Stack, user: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {stack.token(user)}"}


def login(tab: Tab, stack: Stack, user: str) -> Page:
    page = tab.page
    page.add_init_script(RECORDER)
    page.goto(stack.base_url)
    page.get_by_label("Your name").fill(user)
    page.get_by_role("button", name="Continue").click()
    expect(page.locator("#connection")).to_have_attribute("data-state", "connected")
    expect(page.locator("#thread-list .thread.is-active")).to_have_count(1)
    expect(page.locator("#user-name")).to_have_text(user)
    expect(page.locator("#messages")).to_have_attribute("aria-busy", "false")  # history drawn
    return page


def send(page: Page, text: str) -> None:
    composer = page.locator("#composer-input")
    composer.fill(text)
    composer.press("Enter")


def ended_cycles(page: Page) -> Locator:
    return page.locator("#messages .cycle[data-state='ended']")


def assistant(page: Page, text: str) -> Locator:
    return page.locator("#messages .msg--assistant").filter(has_text=text)


def user_bubbles(page: Page, text: str) -> Locator:
    return page.locator("#messages .msg--user .bubble").filter(
        has_text=re.compile(f"^{re.escape(text)}$")
    )


def message_ids(page: Page) -> list[str]:
    ids: list[str] = page.eval_on_selector_all(
        "#messages > li[data-id]", "items => items.map((item) => item.dataset.id)"
    )
    return ids


def shoot(page: Page, artifacts: Path, name: str) -> None:
    page.screenshot(path=str(artifacts / f"{name}.png"), animations="disabled")


def test_remember_recall_and_forget(stack: Stack, tab: Tab, artifacts: Path) -> None:
    user = unique("ana")
    page = login(tab, stack, user)
    expect(page.locator("#empty-state")).to_be_visible()

    send(page, "remember that my favourite colour is green")
    expect(user_bubbles(page, "remember that my favourite colour is green")).to_have_count(1)
    saved = assistant(page, "Noted: your favourite colour is green.")
    expect(saved).to_be_visible()
    # The conversation's first answer says no model answers; every answer has the badge.
    expect(saved).to_contain_text("No language model is answering")
    expect(saved.locator(".model--offline .model__name")).to_have_text(OFFLINE_BADGE)
    stored = page.locator("#messages .msg--memory-saved")
    expect(stored.locator(".mem__label")).to_have_text("Memory saved")
    expect(stored.locator(".mem__content")).to_have_text("My favourite colour is green")
    cycle = ended_cycles(page)
    expect(cycle).to_have_count(1)
    expect(cycle.locator(".cycle__steps li")).to_have_text(["MemorySave", "Finalize"])
    expect(cycle.locator(".cycle__label")).to_have_text("Done")
    # The status lines were shown while the cycle ran, and each was replaced.
    seen: dict[str, Any] = page.evaluate("window.__seen")
    assert "Thinking..." in seen["statuses"], seen
    assert any(s.startswith("Saving memories") for s in seen["statuses"]), seen
    assert seen["streamed"], "the answer was never shown while it streamed"
    expect(page.locator("#messages .status-row")).to_have_count(0)
    expect(page.locator("#empty-state")).to_be_hidden()

    send(page, "what is my favourite colour?")
    card = page.locator("#messages .msg--memory-found")
    expect(card.locator(".mem__content")).to_have_text("My favourite colour is green")
    expect(card.locator(".badge")).to_have_text("preference")
    expect(card.locator(".relevance")).to_have_text("best match")  # words, not a percentage
    expect(ended_cycles(page)).to_have_count(2)
    expect(ended_cycles(page).nth(1).locator(".cycle__steps li")).to_have_text(
        ["MemorySearch", "Finalize"]
    )
    recalled = page.locator("#messages .msg--assistant").last
    expect(recalled.locator(".bubble")).to_have_text("Your favourite colour is green.")
    expect(recalled.locator(".model__name")).to_have_text(OFFLINE_BADGE)
    expect(recalled).not_to_contain_text("No language model")  # said once, then the badge
    # The search's answer is the turn's one answer: no "Done." bubble after it, and no
    # status line left once the cycle ended.
    expect(page.locator("#messages .msg--assistant")).to_have_count(2)
    expect(page.locator("#messages .msg--assistant").last).to_contain_text("Your favourite")
    expect(page.locator("#messages .status-row")).to_have_count(0)
    card.locator("summary").click()
    expect(card.locator(".mem__bindings li").first).to_be_visible()
    shoot(page, artifacts, "chat-light-desktop")

    page.get_by_role("button", name="Memories", exact=True).click()
    panel = page.locator("#memories")
    expect(panel).to_be_visible()
    listed = panel.locator(".memories__item")
    expect(listed.locator(".mem__content")).to_have_text(["My favourite colour is green"])
    listed.get_by_role("button", name="Show the history of this memory").click()
    expect(listed.locator(".history__item--created")).to_contain_text("via chat")
    shoot(page, artifacts, "memories-panel-light-desktop")

    listed.get_by_role("button", name="Delete this memory").click()
    dialog = page.locator("#confirm")
    expect(dialog).to_be_visible()
    expect(dialog).to_contain_text("My favourite colour is green")
    dialog.get_by_role("button", name="Delete").click()
    expect(panel.locator(".memories__item")).to_have_count(0)
    expect(page.locator("#memories-summary")).to_contain_text("No memories yet")
    left = httpx.get(f"{stack.base_url}/api/memories", headers=headers(stack, user))
    assert left.status_code == 200, left.text
    assert left.json()["memories"] == []


def test_a_memory_is_edited_in_the_drawer_and_found_by_its_new_words(
    stack: Stack, tab: Tab, artifacts: Path
) -> None:
    user = unique("eva")
    page = login(tab, stack, user)
    send(page, "remember that my favourite colour is green")
    expect(assistant(page, "Noted: your favourite colour is green.")).to_be_visible()

    page.get_by_role("button", name="Memories", exact=True).click()
    listed = page.locator("#memories .memories__item")
    expect(listed.locator(".mem__content")).to_have_text(["My favourite colour is green"])
    # Escape leaves the editor as it was, and keeps the drawer open.
    listed.get_by_role("button", name="Edit this memory").click()
    box = listed.get_by_role("textbox", name="The memory's text")
    box.fill("changed my mind")
    box.press("Escape")
    expect(page.locator("#memories")).to_be_visible()
    expect(listed.locator(".mem__content")).to_have_text(["My favourite colour is green"])
    # An empty text is refused, and nothing is changed.
    listed.get_by_role("button", name="Edit this memory").click()
    box.fill("   ")
    listed.get_by_role("button", name="Save").click()
    expect(page.locator("#notices")).to_contain_text("cannot be empty")
    # A paste past a memory's limit is kept whole, counted, and cannot be saved.
    box.fill("x" * 8001)
    assert len(box.input_value()) == 8001
    expect(listed.locator(".composer__count")).to_have_class(re.compile("is-over"))
    expect(listed.get_by_role("button", name="Save")).to_be_disabled()
    box.fill("My favourite colour is dark blue")
    shoot(page, artifacts, "memory-edit-light-desktop")
    box.press("Control+Enter")
    expect(listed.locator(".mem__content")).to_have_text(["My favourite colour is dark blue"])
    listed.get_by_role("button", name="Show the history of this memory").click()
    expect(listed.locator(".history__item--updated .history__old")).to_have_text(
        "My favourite colour is green"
    )

    (memory,) = httpx.get(f"{stack.base_url}/api/memories", headers=headers(stack, user)).json()[
        "memories"
    ]
    assert memory["content"] == "My favourite colour is dark blue"
    # The key that was the old sentence is the new one; the topic keys stay.
    assert memory["bindings"][0] == "My favourite colour is dark blue"
    assert "My favourite colour is green" not in memory["bindings"]
    assert "favourite colour" in memory["bindings"]
    # The chat finds it by its new words.
    page.get_by_role("button", name="Close memories").click()
    send(page, "what is my favourite colour?")
    expect(assistant(page, "Your favourite colour is dark blue.")).to_be_visible()
    assert not tab.errors, tab.errors


def test_model_and_memory_text_never_becomes_markup(
    stack: Stack, tab: Tab, artifacts: Path
) -> None:
    user = unique("eve")
    created = httpx.post(
        f"{stack.base_url}/api/memories",
        headers=headers(stack, user),
        json={
            "content": HOSTILE,
            "bindings": ["favourite snack", "snack"],
            "memory_type": "preference",
        },
    )
    assert created.status_code == 201, created.text
    page = login(tab, stack, user)

    send(page, "what is my favourite snack?")
    expect(ended_cycles(page)).to_have_count(1)
    expect(page.locator("#messages .msg--memory .mem__content")).to_have_text(HOSTILE)
    told_back = HOSTILE.replace("My", "Your", 1)
    expect(assistant(page, "Your favourite snack").locator(".bubble")).to_contain_text(
        f"{told_back}."
    )
    expect(page.locator("#messages img, #messages script")).to_have_count(0)

    page.get_by_role("button", name="Memories", exact=True).click()
    panel = page.locator("#memories")
    expect(panel.locator(".mem__content")).to_have_text([HOSTILE])
    page.locator("#memories-query").fill("favourite snack")
    expect(page.locator("#memories-summary")).to_contain_text("found for")
    expect(panel.locator(".mem__content")).to_have_text([HOSTILE])
    expect(panel.locator(".relevance")).to_have_text(["best match"])
    expect(panel.locator("img, script")).to_have_count(0)
    assert page.evaluate("typeof window.__pwned") == "undefined"
    shoot(page, artifacts, "hostile-content-as-text")

    # The markdown renderer: the safe subset becomes elements, everything else stays text.
    facts: dict[str, Any] = page.evaluate(
        """async (source) => {
          const { renderMarkdown } = await import("/static/js/markdown.js");
          const box = document.createElement("div");
          box.append(renderMarkdown(source));
          const texts = (selector) => [...box.querySelectorAll(selector)].map((e) => e.textContent);
          return {
            strong: texts("strong"), em: texts("em"), code: texts(":not(pre) > code"),
            bullets: texts("ul > li"), numbered: texts("ol > li"), pre: texts("pre code"),
            links: [...box.querySelectorAll("a")]
              .map((a) => [a.getAttribute("href"), a.rel, a.target]),
            breaks: box.querySelectorAll("p br").length,
            unsafe: box.querySelectorAll("img, script, iframe, [onerror], [onclick]").length,
            text: box.textContent,
          };
        }""",
        "**bold** and *italic* and `code <b>`\nnext line\n\n- one\n- two\n\n1. first\n2. second\n\n"
        "```js\n<script>alert(3)</script>\n```\n"
        "[safe](https://example.com/a?b=1) [unsafe](javascript:alert(4)) "
        "[data](data:text/html,<script>alert(5)</script>)\n"
        "<img src=x onerror=alert(6)> see https://example.org/path.",
    )
    assert facts["strong"] == ["bold"]
    assert facts["em"] == ["italic"]
    assert facts["code"] == ["code <b>"]
    assert facts["bullets"] == ["one", "two"]
    assert facts["numbered"] == ["first", "second"]
    assert facts["pre"] == ["<script>alert(3)</script>"]
    assert facts["breaks"] >= 1
    assert facts["links"] == [
        ["https://example.com/a?b=1", "noopener noreferrer", "_blank"],
        ["https://example.org/path", "noopener noreferrer", "_blank"],
    ]
    assert facts["unsafe"] == 0
    assert "[unsafe](javascript:alert(4))" in facts["text"]
    assert "<img src=x onerror=alert(6)>" in facts["text"]


def test_new_thread_rename_switch_and_unread(
    stack: Stack, tab: Tab, context: BrowserContext, artifacts: Path
) -> None:
    user = unique("rui")
    page = login(tab, stack, user)
    threads = page.locator("#thread-list .thread")
    expect(threads).to_have_count(1)  # a first conversation is ready
    first_id = threads.first.get_attribute("data-thread-id")
    send(page, "remember that my city is Lisbon")
    expect(ended_cycles(page)).to_have_count(1)

    page.get_by_role("button", name="New chat", exact=True).click()
    expect(threads).to_have_count(2)
    active = page.locator("#thread-list .thread.is-active")
    expect(active).not_to_have_attribute("data-thread-id", first_id or "")
    expect(page.locator("#thread-title")).to_have_text("New chat")
    expect(page.locator("#empty-state")).to_be_visible()
    new_id = active.get_attribute("data-thread-id")
    assert new_id

    active.get_by_role("button", name=re.compile("^Rename")).click()
    title = page.get_by_label("Conversation title")
    title.fill("Holiday plans")
    title.press("Enter")
    renamed = page.locator(f"#thread-list [data-thread-id='{new_id}']")
    expect(renamed.locator(".thread__title")).to_have_text("Holiday plans")
    expect(page.locator("#thread-title")).to_have_text("Holiday plans")
    listed = httpx.get(f"{stack.base_url}/api/threads", headers=headers(stack, user)).json()
    assert {t["thread_id"]: t["title"] for t in listed["threads"]}[new_id] == "Holiday plans"

    renamed.get_by_role("button", name=re.compile("^Rename")).click()
    title.fill("Not this")
    title.press("Escape")  # cancels
    expect(renamed.locator(".thread__title")).to_have_text("Holiday plans")

    # Back to the first thread: its history is loaded from the server.
    page.locator(f"#thread-list [data-thread-id='{first_id}'] .thread__main").click()
    expect(user_bubbles(page, "remember that my city is Lisbon")).to_have_count(1)
    expect(assistant(page, "Noted: your city is Lisbon.")).to_be_visible()
    expect(page.locator("#thread-title")).to_have_text("remember that my city is Lisbon")

    # Another tab of the same user writes in "Holiday plans": this tab keeps its conversation
    # and shows an unread dot on the other thread.
    other = Tab(context.new_page())
    other_page = login(other, stack, user)
    other_page.locator(f"#thread-list [data-thread-id='{new_id}'] .thread__main").click()
    expect(other_page.locator("#thread-title")).to_have_text("Holiday plans")
    send(other_page, "remember that I fly on Friday")
    expect(ended_cycles(other_page)).to_have_count(1)
    expect(renamed.locator(".thread__dot")).to_be_visible()
    expect(user_bubbles(page, "remember that I fly on Friday")).to_have_count(0)
    shoot(page, artifacts, "threads-unread-light-desktop")
    renamed.locator(".thread__main").click()
    expect(page.locator("#messages")).to_have_attribute("aria-busy", "false")
    expect(renamed.locator(".thread__dot")).to_have_count(0)
    expect(user_bubbles(page, "remember that I fly on Friday")).to_have_count(1)
    assert not other.errors and not other.dialogs, (other.errors, other.dialogs)


def stored_ids(stack: Stack, user: str, thread_id: str, expected: int) -> list[str]:
    """The thread's stored message ids, once the memory service has stored ``expected``."""
    deadline = time.monotonic() + STORE_TIMEOUT_S
    while True:
        response = httpx.get(
            f"{stack.base_url}/api/threads/{thread_id}/messages", headers=headers(stack, user)
        )
        response.raise_for_status()
        body = response.json()
        messages: list[dict[str, Any]] = body if isinstance(body, list) else body["messages"]
        if len(messages) >= expected or time.monotonic() > deadline:
            return [m["id"] for m in messages]
        time.sleep(0.2)  # polling the store, not waiting instead of asserting


def drop_socket(page: Page) -> int:
    """Close the page's socket; returns how many resumes the page had seen before, for
    :func:`wait_for_resume`."""
    before = len(page.evaluate("window.__memoria.resumes"))
    page.evaluate("window.__memoria.socket.close()")
    return before


def wait_for_resume(page: Page, before: int) -> None:
    """Until the page's new socket has resumed: its connection state alone may still read
    "connected" from the socket just closed, and a second close would then hit that one."""
    # A function, not an expression: the page's policy forbids eval (no 'unsafe-eval').
    page.wait_for_function(
        "(before) => window.__memoria.resumes.length > before", arg=before, timeout=TIMEOUT_MS
    )


def test_reconnect_resumes_without_losing_or_repeating(
    stack: Stack, tab: Tab, artifacts: Path
) -> None:
    user = unique("lia")
    sockets: list[str] = []
    tab.page.on("websocket", lambda ws: sockets.append(ws.url))
    page = login(tab, stack, user)

    # Drop the socket as soon as the cycle's first frame arrived: the rest comes by replay.
    send(page, "remember that my dog is called Rex")
    page.wait_for_function("() => window.__memoria.socket.lastEventId !== null")
    wait_for_resume(page, drop_socket(page))
    expect(page.locator("#connection")).to_have_attribute("data-state", "connected")
    expect(ended_cycles(page)).to_have_count(1)
    expect(assistant(page, "Noted: your dog is called Rex.")).to_have_count(1)

    # Drop it again and write while it is down: the message waits and goes out on reconnect.
    dropped = drop_socket(page)
    send(page, "what is my dog called?")
    wait_for_resume(page, dropped)
    expect(page.locator("#connection")).to_have_attribute("data-state", "connected")
    expect(ended_cycles(page)).to_have_count(2)
    expect(page.locator("#messages .msg--memory-found .mem__content")).to_have_text(
        "My dog is called Rex"
    )

    seen: dict[str, Any] = page.evaluate("window.__seen")
    assert "reconnecting" in seen["connection"], seen
    assert len(sockets) >= 3 and all("since=" in url for url in sockets[1:]), sockets
    assert not any("token=" in url for url in sockets), sockets  # it rides in the handshake
    resumes: list[dict[str, Any]] = page.evaluate("window.__memoria.resumes")
    assert resumes and all(r.get("type") == "resumed" and r["complete"] for r in resumes), resumes

    live = message_ids(page)
    assert len(live) == len(set(live)), f"a message is shown twice: {live}"
    expect(user_bubbles(page, "remember that my dog is called Rex")).to_have_count(1)
    expect(user_bubbles(page, "what is my dog called?")).to_have_count(1)
    thread_id = page.evaluate("window.__memoria.threadId")
    assert stored_ids(stack, user, thread_id, len(live)) == live  # nothing lost, same order
    shoot(page, artifacts, "after-reconnect-light-desktop")

    page.reload()  # the stored conversation draws the same
    expect(page.locator("#connection")).to_have_attribute("data-state", "connected")
    expect(page.locator("#messages > li[data-id]")).to_have_count(len(live))
    assert message_ids(page) == live


def test_refused_message_keeps_the_text(stack: Stack, tab: Tab) -> None:
    page = login(tab, stack, unique("max"))
    too_long = "a" * (MAX_MESSAGE_CHARS + 20)
    send(page, too_long)
    # Over the limit the page said so before sending, and kept every character.
    counter = page.locator("#composer-count")
    expect(counter).to_be_visible()
    expect(counter).to_have_class(re.compile("is-over"))
    expect(counter).to_contain_text(f"{MAX_MESSAGE_CHARS + 20} / {MAX_MESSAGE_CHARS}")
    expect(page.locator("#send")).to_be_disabled()
    notice = page.locator("#notices .notice[data-code='too_large']")
    expect(notice).to_be_visible()
    expect(notice).to_contain_text("20 characters over the limit")
    expect(page.locator("#composer-input")).to_have_value(too_long)
    expect(page.locator("#messages .msg--user")).to_have_count(0)
    notice.get_by_role("button", name="Dismiss").click()
    expect(page.locator("#notices .notice")).to_have_count(0)


REFUSED_FOR_NOW: list[dict[str, Any]] = [
    {"code": "rate_limited", "message": "Too many messages: try again in 1 s", "retry_after": 1},
    {"code": "broker_unavailable", "message": "The message could not be queued."},
]


def test_a_message_refused_for_now_is_sent_again_by_itself(stack: Stack, tab: Tab) -> None:
    """``rate_limited`` and ``broker_unavailable`` are about the moment, not the message: the
    page waits and sends the same frame again instead of handing the text back. The gateway
    is made to refuse through the page's own socket (Playwright's WebSocket route), once with
    each code, as it answers when over the rate or without its broker."""
    page = tab.page
    sent_ids: list[str] = []

    def refuse_twice(route: WebSocketRoute) -> None:
        server = route.connect_to_server()

        def from_page(message: str | bytes) -> None:
            frame = json.loads(message) if isinstance(message, str) else {}
            if frame.get("type") == "message":
                sent_ids.append(frame["id"])
                if len(sent_ids) <= len(REFUSED_FOR_NOW):
                    route.send(json.dumps({"type": "error", **REFUSED_FOR_NOW[len(sent_ids) - 1]}))
                    return
            server.send(message)

        route.on_message(from_page)

    page.route_web_socket(re.compile(r"/ws(\?|$)"), refuse_twice)
    login(tab, stack, unique("patient"))
    send(page, "I love hiking")

    pending = page.locator("#messages .msg--user.is-pending .msg__meta")
    expect(pending).to_contain_text("trying again in 1 s")
    expect(assistant(page, "Noted: you love hiking.")).to_be_visible()
    expect(user_bubbles(page, "I love hiking")).to_have_count(1)
    expect(page.locator("#messages .msg--user.is-pending")).to_have_count(0)
    expect(page.locator("#composer-input")).to_have_value("")
    expect(page.locator("#notices .notice--error")).to_have_count(0)
    assert len(sent_ids) == 3 and len(set(sent_ids)) == 1, sent_ids  # one client id throughout

    # When to stop: every other refusal is final at once; these two after so many.
    delays = page.evaluate(
        """async () => {
          const { resendDelay } = await import("/static/js/resend.js");
          const limited = (extra) => ({ type: "error", code: "rate_limited", ...extra });
          const broker = { type: "error", code: "broker_unavailable" };
          return [
            resendDelay(limited({ retry_after: 7 }), 1),
            resendDelay(limited({}), 1),
            resendDelay(limited({ retry_after: 3600 }), 1),
            resendDelay(limited({ retry_after: 7 }), 20),
            resendDelay(broker, 1),
            resendDelay(broker, 5),
            resendDelay(broker, 6),
            resendDelay({ type: "error", code: "too_large" }, 1),
            resendDelay({ type: "accepted" }, 1),
          ];
        }"""
    )
    assert delays == [7, 1, 60, None, 1, 16, None, None, None]


def test_a_tab_over_the_socket_cap_says_why_and_stays_offline(
    stack: Stack, tab: Tab, context: BrowserContext
) -> None:
    user = unique("zoe")
    first = login(tab, stack, user)
    others = [Tab(context.new_page()) for _ in range(SOCKETS_PER_USER)]
    *within, over = others
    for other in within:
        login(other, stack, user)
    over.page.goto(stack.base_url)
    over.page.get_by_label("Your name").fill(user)
    over.page.get_by_role("button", name="Continue").click()
    expect(over.page.locator("#notices .notice[data-code='too_many_connections']")).to_be_visible()
    expect(over.page.locator("#connection")).to_have_attribute("data-state", "closed")

    send(first, "hello")  # the tabs within the cap are unaffected
    expect(ended_cycles(first)).to_have_count(1)
    expect(over.page.locator("#connection")).to_have_attribute("data-state", "closed")

    within[0].page.close()  # a place is free: a reload connects
    over.page.reload()
    expect(over.page.locator("#connection")).to_have_attribute("data-state", "connected")
    for other in others:
        assert not other.errors, f"uncaught errors in the page: {other.errors}"


async def fill_thread(stack: Stack, user: str, thread_id: str, cycles: int) -> None:
    async with chat(stack.ws_url(user)) as client:
        accepted = [await client.send(thread_id, f"note {n} of a long day") for n in range(cycles)]
        await client.cycle(accepted[-1]["id"], timeout=120)  # queued: the last ends last


def all_stored_ids(stack: Stack, user: str, thread_id: str) -> list[str]:
    response = httpx.get(
        f"{stack.base_url}/api/threads/{thread_id}/messages",
        params={"limit": 1000},
        headers=headers(stack, user),
    )
    response.raise_for_status()
    return [m["id"] for m in response.json()]


def test_a_long_thread_loads_earlier_messages_on_demand(
    stack: Stack, tab: Tab, artifacts: Path
) -> None:
    user, thread_id = unique("ivo"), "t-long"
    with ThreadPoolExecutor(1) as pool:  # the page's loop is Playwright's; this one is apart
        pool.submit(asyncio.run, fill_thread(stack, user, thread_id, LONG_THREAD_CYCLES)).result()
    stored = all_stored_ids(stack, user, thread_id)
    assert len(stored) > HISTORY_PAGE

    page = login(tab, stack, user)
    page.locator(f"#thread-list [data-thread-id='{thread_id}'] .thread__main").click()
    expect(page.locator("#messages > li[data-id]")).to_have_count(HISTORY_PAGE)
    assert message_ids(page) == stored[-HISTORY_PAGE:]  # the newest page
    earlier = page.get_by_role("button", name="Load earlier messages")
    expect(earlier).to_be_visible()

    earlier.click()
    expect(page.locator("#messages > li[data-id]")).to_have_count(len(stored))
    assert message_ids(page) == stored  # each once, in order
    expect(earlier).to_have_count(0)  # the last page was short: nothing older
    # What was on screen stays there: the view did not jump to the top.
    assert page.eval_on_selector("#scroller", "s => s.scrollTop") > 0
    shoot(page, artifacts, "long-thread-loaded-earlier")

    # A reconnect that cannot replay everything draws the thread again: the older messages
    # the reader loaded stay, and so does their place.
    page.eval_on_selector("#scroller", "s => { s.scrollTop = 0; }")
    page.evaluate("window.__memoria.socket.lastEventId = '0-1'")  # older than the stream
    wait_for_resume(page, drop_socket(page))
    assert page.evaluate("window.__memoria.resumes.at(-1).complete") is False
    expect(page.locator("#messages")).to_have_attribute("aria-busy", "false")
    expect(page.locator("#messages > li[data-id]")).to_have_count(len(stored))
    assert message_ids(page) == stored
    expect(earlier).to_have_count(0)
    assert page.eval_on_selector("#scroller", "s => s.scrollTop") < 100  # still at the top


def test_token_login_when_dev_login_is_off(stack: Stack, tab: Tab, artifacts: Path) -> None:
    page = tab.page
    page.route(
        "**/api/token",
        lambda route: route.fulfill(
            status=404, content_type="application/json", body='{"detail": "dev login is disabled"}'
        ),
    )
    page.goto(stack.base_url)
    page.get_by_label("Your name").fill("someone")
    page.get_by_role("button", name="Continue").click()
    expect(page.get_by_text("dev login is disabled; paste a token")).to_be_visible()
    token_field = page.get_by_label("Token")
    shoot(page, artifacts, "login-token-light-desktop")

    token_field.fill("not.a.token")  # forged: the server refuses it, the page asks again
    page.get_by_role("button", name="Use this token").click()
    expect(page.locator("#login-error")).to_contain_text("log in again")
    expect(page.locator("#app-view")).to_be_hidden()

    user = unique("tok")
    token_field.fill(stack.token(user))
    page.get_by_role("button", name="Use this token").click()
    expect(page.locator("#connection")).to_have_attribute("data-state", "connected")
    expect(page.locator("#user-name")).to_have_text(user)


def test_themes_phone_layout_and_logout(
    stack: Stack, tab: Tab, browser: Browser, artifacts: Path
) -> None:
    page = tab.page
    page.goto(stack.base_url)
    shoot(page, artifacts, "login-light-desktop")
    page = login(tab, stack, unique("zoe"))
    background = "getComputedStyle(document.body).backgroundColor"
    assert page.evaluate("document.documentElement.dataset.theme") is None  # follows the system
    assert page.evaluate(background) == LIGHT_BG
    send(page, "remember that I like **jazz** and `vinyl`")
    expect(ended_cycles(page)).to_have_count(1)
    page.locator("#composer-input").fill("Enter sends, Shift+Enter adds a line")

    page.get_by_role("button", name="Switch to dark theme").click()
    expect(page.locator("html")).to_have_attribute("data-theme", "dark")
    assert page.evaluate(background) == DARK_BG
    shoot(page, artifacts, "chat-dark-desktop")
    page.get_by_role("button", name="Memories", exact=True).click()
    expect(page.locator("#memories .memories__item")).to_have_count(1)
    shoot(page, artifacts, "memories-panel-dark-desktop")
    page.get_by_role("button", name="Close memories").click()

    page.reload()  # the theme is remembered, the session too
    expect(page.locator("html")).to_have_attribute("data-theme", "dark")
    expect(page.locator("#connection")).to_have_attribute("data-state", "connected")

    page.set_viewport_size(PHONE)
    expect(page.locator("#sidebar")).not_to_be_in_viewport()
    expect(ended_cycles(page)).to_have_count(1)  # the reply's summary, from the history
    expect(assistant(page, "Noted:")).to_be_visible()
    shoot(page, artifacts, "chat-dark-phone")
    page.get_by_role("button", name="Open the conversation list").click()
    expect(page.locator("#sidebar")).to_be_in_viewport()
    shoot(page, artifacts, "sidebar-dark-phone")
    page.get_by_role("button", name="Switch to light theme").click()
    expect(page.locator("html")).to_have_attribute("data-theme", "light")
    page.keyboard.press("Escape")
    expect(page.locator("#sidebar")).not_to_be_in_viewport()
    shoot(page, artifacts, "chat-light-phone")

    page.get_by_role("button", name="Open the conversation list").click()
    page.get_by_role("button", name="Log out").click()
    expect(page.locator("#login-view")).to_be_visible()
    page.reload()
    expect(page.locator("#login-view")).to_be_visible()  # the token is gone
    # A phone keyboard must not make "ana" into "Ana": user ids are case-sensitive, and
    # "Ana" is somebody else, with none of ana's memories.
    expect(page.locator("#login-user")).to_have_attribute("autocapitalize", "none")

    # Without a saved choice, a dark system gets the dark theme.
    dark = browser.new_context(color_scheme="dark")
    try:
        fresh = dark.new_page()
        fresh.goto(stack.base_url)
        expect(fresh.locator("#login-view")).to_be_visible()
        assert fresh.evaluate(background) == DARK_BG
    finally:
        dark.close()


def test_a_persona_switched_in_another_tab_shows_once_its_cycle_ends(
    stack: Stack, tab: Tab, context: BrowserContext
) -> None:
    user = unique("noa")
    first = login(tab, stack, user)
    second_tab = Tab(context.new_page())
    second = login(second_tab, stack, user)
    thread_id = first.locator("#thread-list .thread.is-active").get_attribute("data-thread-id")
    assert thread_id
    assert second.locator("#thread-list .thread.is-active").get_attribute("data-thread-id") == (
        thread_id
    )
    expect(second.get_by_label("Persona")).to_have_value("memoria")

    first.get_by_label("Persona").select_option(label="Leo the Coach")
    expect(first.locator(".notice").filter(has_text="Leo the Coach answers")).to_be_visible()
    send(first, "hello from the first tab")
    expect(ended_cycles(second)).to_have_count(1)  # the cycle's frames reach both tabs
    expect(second.get_by_label("Persona")).to_have_value("coach")
    assert not second_tab.errors, f"uncaught errors in the page: {second_tab.errors}"


def test_persona_picker_switches_the_open_thread(stack: Stack, tab: Tab, artifacts: Path) -> None:
    user = unique("lia")
    page = login(tab, stack, user)
    picker = page.get_by_label("Persona")
    expect(picker).to_be_enabled()
    expect(picker).to_have_value("memoria")
    options = picker.locator("option")
    expect(options).to_have_text(["Memoria", "Ada the Tutor", "Leo the Coach"])
    thread_id = page.locator("#thread-list .thread.is-active").get_attribute("data-thread-id")
    assert thread_id

    picker.select_option(label="Leo the Coach")
    expect(
        page.locator(".notice").filter(has_text="Leo the Coach answers from your next")
    ).to_be_visible()
    config = httpx.get(
        f"{stack.base_url}/api/threads/{thread_id}/config", headers=headers(stack, user)
    ).json()
    assert config["config"]["persona"] == "coach"
    assert [(e["previous"], e["persona"]) for e in config["agentHistory"]] == [("memoria", "coach")]
    send(page, "hello there")
    expect(ended_cycles(page)).to_have_count(1)  # the thread keeps working after a switch
    shoot(page, artifacts, "persona-picker-light-desktop")

    # Another thread has its own persona; coming back shows this one's again.
    page.get_by_role("button", name="New chat", exact=True).click()
    expect(page.locator("#empty-state")).to_be_visible()
    expect(picker).to_have_value("memoria")
    page.locator(f"#thread-list [data-thread-id='{thread_id}'] .thread__main").click()
    expect(picker).to_have_value("coach")


def test_a_long_paste_is_kept_whole_and_counted(stack: Stack, tab: Tab) -> None:
    """No maxlength cuts a paste: the text stays whole, the counter shows from near the limit
    on, and the button comes back once the text is short enough again."""
    page = login(tab, stack, unique("paste"))
    composer = page.locator("#composer-input")
    counter = page.locator("#composer-count")
    composer.fill("a" * (MAX_MESSAGE_CHARS // 2))
    expect(counter).to_be_hidden()
    pasted = "b" * (MAX_MESSAGE_CHARS * 200)  # far past the limit, and past the frame size
    composer.fill(pasted)
    assert page.evaluate("document.getElementById('composer-input').value.length") == len(pasted)
    expect(counter).to_have_class(re.compile("is-over"))
    expect(page.locator("#send")).to_be_disabled()
    composer.fill("c" * MAX_MESSAGE_CHARS)  # exactly the limit: counted, and sendable
    expect(counter).to_be_visible()
    expect(counter).not_to_have_class(re.compile("is-over"))
    expect(page.locator("#send")).to_be_enabled()
    composer.press("Enter")
    expect(user_bubbles(page, "c" * MAX_MESSAGE_CHARS)).to_have_count(1)
    expect(counter).to_be_hidden()


def test_reply_summaries_are_there_after_a_reload(stack: Stack, tab: Tab) -> None:
    page = login(tab, stack, unique("reload"))
    send(page, "remember that my cat is called Miso")
    expect(ended_cycles(page)).to_have_count(1)
    send(page, "what is my cat called?")
    expect(ended_cycles(page)).to_have_count(2)
    live = [ended_cycles(page).nth(i).locator(".cycle__steps li").all_inner_texts() for i in (0, 1)]
    assert live == [["MemorySave", "Finalize"], ["MemorySearch", "Finalize"]]

    page.reload()
    expect(page.locator("#messages")).to_have_attribute("aria-busy", "false")
    footers = ended_cycles(page)
    expect(footers).to_have_count(2)
    for i, steps in enumerate(live):
        footer = footers.nth(i)
        expect(footer.locator(".cycle__steps li")).to_have_text(steps)
        expect(footer.locator(".cycle__label")).to_have_text("Done")
        expect(footer.locator(".cycle__meta")).to_have_text(re.compile(r"^\d+(\.\d)? m?s"))
    # Each footer sits under its own reply, as it did live.
    order = page.eval_on_selector_all(
        "#messages > li",
        "items => items.map((i) => i.classList.contains('cycle') ? 'end' : i.dataset.role)",
    )
    assert order[-1] == "end" and order.count("end") == 2, order
    assert order.index("end") > order.index("user"), order


BIDI_ISOLATED = """() => [...document.querySelectorAll(
  "#messages .bubble, .mem__content, #thread-list .thread__title, "
  + "#thread-list .thread__preview, #thread-title, #user-name")]
  .filter((element) => element.textContent.includes("⟨U+202E⟩"))
  .map((element) => [element.className || element.id, getComputedStyle(element).unicodeBidi])"""


def test_a_typed_name_logs_in_and_user_text_is_bidi_isolated(stack: Stack, tab: Tab) -> None:
    """Any name logs in and is shown as typed; a right-to-left override in a message, a
    thread title or a memory reorders only its own element, never the page around it."""
    page = tab.page
    page.goto(stack.base_url)
    name = f"João Silva {uuid.uuid4().hex[:6]}"
    page.get_by_label("Your name").fill(f"  {name} ")
    page.get_by_role("button", name="Continue").click()
    expect(page.locator("#connection")).to_have_attribute("data-state", "connected")
    expect(page.locator("#user-name")).to_have_text(name)
    expect(page.locator("#user-avatar")).to_have_text("J")

    send(page, "remember that my code is \u202eABC-123")
    expect(ended_cycles(page)).to_have_count(1)
    page.get_by_role("button", name="Memories", exact=True).click()
    expect(page.locator("#memories .mem__content")).to_have_count(1)
    page.locator("#thread-title").dblclick()
    title = page.locator("#thread-list .thread__input")
    title.fill("\u202eABC-123 plans")
    title.press("Enter")
    expect(page.locator("#thread-title")).to_have_text("⟨U+202E⟩ABC-123 plans")

    isolated = page.evaluate(BIDI_ISOLATED)
    kinds = {kind.split()[0] for kind, _ in isolated}
    assert {"bubble", "thread__title", "chat__title", "mem__content"} <= kinds, isolated
    assert all(bidi in ("isolate", "plaintext") for _, bidi in isolated), isolated
    assert page.title() == "\u2068⟨U+202E⟩ABC-123 plans\u2069 · Memoria"
    # Outside the isolated elements the interface reads as it should.
    expect(page.locator("#memories-title")).to_have_text("Your memories")
    assert page.evaluate("getComputedStyle(document.body).direction") == "ltr"


FAMILY = "\U0001f468\u200d\U0001f469\u200d\U0001f467"


def test_invisible_characters_show_as_marked_code_points(
    stack: Stack, tab: Tab, artifacts: Path
) -> None:
    """The finding: a memory "remember that my pin is \u202e1234\u202c" showed as "my pin
    is 4321" in the chat, the cards, the memories drawer, thread titles and the sidebar. Each
    invisible format or direction character now shows as what it is, wherever text is
    shown, and is stored as sent; a joiner inside an emoji stays part of it."""
    user = unique("pin")
    page = login(tab, stack, user)
    told = "remember that my pin is \u202e1234\u202c"
    shown = "my pin is ⟨U+202E⟩1234⟨U+202C⟩"
    send(page, told)
    expect(ended_cycles(page)).to_have_count(1)
    expect(page.locator("#messages .msg--user .bubble")).to_have_text(
        "remember that my pin is ⟨U+202E⟩1234⟨U+202C⟩"
    )
    send(page, "what is my pin?")
    expect(ended_cycles(page)).to_have_count(2)
    card = page.locator("#messages .msg--memory .mem__content").last  # the one recalled
    expect(card).to_contain_text(shown, ignore_case=True)
    marker = card.locator(".invisible-char").first
    expect(marker).to_have_text("⟨U+202E⟩")
    expect(marker).to_have_attribute("title", re.compile("right-to-left override"))

    page.get_by_role("button", name="Memories", exact=True).click()
    drawer = page.locator("#memories .mem__content")
    expect(drawer).to_contain_text(shown, ignore_case=True)

    page.locator("#thread-title").dblclick()
    title = page.locator("#thread-list .thread__input")
    title.fill("pin \u202e4321 " + FAMILY)
    title.press("Enter")
    expect(page.locator("#thread-title")).to_have_text(f"pin ⟨U+202E⟩4321 {FAMILY}")
    expect(page.locator("#thread-list .thread.is-active .thread__title")).to_have_text(
        f"pin ⟨U+202E⟩4321 {FAMILY}"
    )
    assert "⟨U+202E⟩4321" in page.title()
    shoot(page, artifacts, "invisible-characters-marked")

    # Stored as sent: the marks are the page's way of showing, not a change of the text.
    stored = httpx.get(f"{stack.base_url}/api/memories", headers=headers(stack, user)).json()
    assert "\u202e1234\u202c" in stored["memories"][0]["content"]
    assert "⟨" not in stored["memories"][0]["content"]


def test_the_api_docs_render_with_no_network(stack: Stack, context: BrowserContext) -> None:
    """Every request to another host is refused: /docs must still show the API."""
    blocked: list[str] = []

    def only_the_gateway(route: Any) -> None:
        if route.request.url.startswith(stack.base_url):
            route.continue_()
        else:
            blocked.append(route.request.url)
            route.abort()

    context.route("**/*", only_the_gateway)
    page = context.new_page()
    page.goto(f"{stack.base_url}/docs")
    expect(page.locator(".swagger-ui .info .title")).to_contain_text("Memoria gateway")
    expect(page.locator(".opblock").first).to_be_visible()
    assert blocked == [], blocked
