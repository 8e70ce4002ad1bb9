"""A question the assistant ends a cycle with stays pending for the thread's next message,
which is the answer only if it answers it (English and Portuguese); the offline planner
reads decision's verdict from the cycle's context and saves only an answer as the asked
fact. Core and planner together, no process."""

from __future__ import annotations

import pytest
from core_cycles import (
    CONFIG,
    answers,
    arrived,
    completion,
    kinds,
    of,
    page,
    run,
    said,
    waiting,
)

from memoria_action_worker.actions.memory_save import SavePlan
from memoria_contracts.events import ActionSpec, CycleContext, Language
from memoria_decision.chooser import decision_prompt
from memoria_decision.core import effects
from memoria_decision.core.answers import answers as answers_question
from memoria_decision.core.machine import decide
from memoria_decision.core.state import CycleState, PendingAction
from memoria_llm.port import LLMOutputError, LLMRequest, Prompt
from memoria_offline import OfflineModel, replies

ADDRESS_EN = "What is my address?"
ADDRESS_PT = "Qual é o meu endereço?"


def asked(question: str, language: Language = "en") -> PendingAction:
    """The planner's "Could you tell me?" after ``question``, as decision keeps it."""
    ask = replies.text("ask_missing", language)
    return PendingAction(
        id="pa_0",
        kind="question",
        language=language,
        asked_in_cycle="cyc_0",
        content=question,
        asked=ask,
    )


# -- the rules ------------------------------------------------------------------------------

NOT_ANSWERS = [
    # refusals
    (ADDRESS_EN, "I have no idea"),
    (ADDRESS_EN, "I have no idea, sorry"),
    (ADDRESS_EN, "sorry, I don't know"),
    (ADDRESS_EN, "Sorry — I don't know my address"),
    (ADDRESS_EN, "never mind"),
    (ADDRESS_EN, "no idea"),
    (ADDRESS_EN, "idk"),
    (ADDRESS_EN, "I'd rather not say"),
    (ADDRESS_EN, "forget it"),
    (ADDRESS_EN, "no"),
    (ADDRESS_EN, "skip"),
    (ADDRESS_EN, "thanks!"),
    (ADDRESS_PT, "não sei"),
    (ADDRESS_PT, "Não sei, desculpa"),
    (ADDRESS_PT, "deixa pra lá"),
    (ADDRESS_PT, "Não faço ideia"),
    (ADDRESS_PT, "sei lá"),
    (ADDRESS_PT, "esquece"),
    (ADDRESS_PT, "prefiro não dizer"),
    (ADDRESS_PT, "obrigado"),
    # a new question
    (ADDRESS_EN, "What time is it?"),
    (ADDRESS_EN, "why do you ask"),
    (ADDRESS_EN, "Can you remind me of my dentist appointment?"),
    (ADDRESS_PT, "qual é o meu nome?"),
    (ADDRESS_PT, "Onde fica a farmácia?"),
    # a statement about something else
    (ADDRESS_EN, "The weather is nice today"),
    (ADDRESS_EN, "My cat is called Tom"),
    (ADDRESS_EN, "I like pizza"),
    (ADDRESS_PT, "O meu gato chama-se Tareco"),
    (ADDRESS_PT, "Hoje está calor e eu gosto de praia"),
    ("What's my daughter's name?", "I have a dog"),
    # what tells a question, a statement or a fragment apart
    (ADDRESS_EN, "Why?"),
    (ADDRESS_PT, "o que?"),
    (ADDRESS_EN, "My cat Tom"),
    (ADDRESS_PT, "O céu é azul"),
    (ADDRESS_EN, "I'm tired"),
    (ADDRESS_EN, "I live in Porto? "),
    (ADDRESS_EN, "😀"),
]
ANSWERS = [
    # a fragment that fills the slot
    (ADDRESS_EN, "5 Elm Street, Springfield"),
    (ADDRESS_EN, "5 Elm Street?"),
    (ADDRESS_PT, "Rua das Flores 12, Lisboa"),
    ("What's my daughter's name?", "Lena"),
    ("Where do I live?", "in Porto."),
    ("Onde eu moro?", "no Porto"),
    ("Onde eu moro?", "nos Açores"),
    ("Quais são os nomes dos meus filhos?", "Pedro e Maria"),
    # a statement of the asked fact
    (ADDRESS_EN, "I live at 5 Elm Street"),
    (ADDRESS_EN, "My address is 5 Elm Street, Springfield"),
    (ADDRESS_EN, "It's 5 Elm Street"),
    (ADDRESS_PT, "Moro na Rua das Flores 12"),
    (ADDRESS_PT, "O meu endereço é Rua das Flores 12"),
    (ADDRESS_PT, "É a Rua das Flores 12, Lisboa"),
    ("What's my daughter's name?", "She is called Lena"),
    ("What is my job?", "I work as a nurse"),
    ("What's my daughter's name?", "It's Lena"),
    ("What's my name?", "I'm Ana"),
    ("Qual é o meu nome?", "Sou a Ana"),
    ("Quem é o responsável?", "Eu"),
]


@pytest.mark.parametrize(("question", "message"), NOT_ANSWERS)
def test_what_is_no_answer(question: str, message: str) -> None:
    assert not answers_question(message, question)


@pytest.mark.parametrize(("question", "message"), ANSWERS)
def test_what_is_the_answer(question: str, message: str) -> None:
    assert answers_question(message, question)


# -- the core keeps the question and hands it over -------------------------------------------


def test_a_cycle_that_ends_asking_keeps_the_question_pending() -> None:
    ask = said("assistant", "Could you tell me?", "cyc_1.1.reply", "cyc_1")
    moved = decide(
        waiting(1, action="Question"),
        completion(1, action="Question", ends=True, messages=[ask]),
        CONFIG,
    )
    (put,) = of(moved, effects.PutPending)
    assert (put.action.kind, put.action.content, put.action.asked) == (
        "question",
        "hi",
        "Could you tell me?",
    )
    assert put.action.id == "pa_1" and put.action.language == "en"
    assert kinds(moved)[-3:] == [effects.MarkEnded, effects.Announce, effects.Release]


def test_a_failed_question_asks_nothing() -> None:
    failed = completion(1, action="Question", ends=True, status="failed", error="down")
    assert not of(decide(waiting(1, action="Question"), failed, CONFIG), effects.PutPending)


def begun(text: str, pending: PendingAction) -> CycleState:
    state, _ = run(None, arrived(text, pending=pending), answers(opening=page()))
    assert isinstance(state, CycleState)
    return state


@pytest.mark.parametrize(
    ("text", "answered"),
    [("5 Elm Street, Springfield", True), ("I have no idea, sorry", False)],
)
def test_the_next_message_goes_to_the_model_with_the_question_and_the_verdict(
    text: str, answered: bool
) -> None:
    _, carried = run(None, arrived(text, pending=asked(ADDRESS_EN)), answers(opening=page()))
    assert effects.ClearPending("pa_0") in carried  # answered or not, it is asked no more
    shown = [e.record for e in carried if isinstance(e, effects.Post)]
    notices = [r for r in shown if r.role == "system" and r.modal == "text"]
    assert notices == []  # dropped without a word
    state = begun(text, asked(ADDRESS_EN))
    question = state.context().pending_question
    assert question is not None
    assert (question.user_question, question.answered) == (ADDRESS_EN, answered)
    assert question.assistant_question == asked(ADDRESS_EN).asked


def test_a_question_kept_without_its_words_is_handed_over_empty() -> None:
    bare = asked(ADDRESS_EN).model_copy(update={"content": None, "asked": None})
    question = begun("5 Elm Street", bare).context().pending_question
    assert question is not None
    assert (question.user_question, question.assistant_question) == ("", "")


def test_a_command_drops_the_question_and_runs() -> None:
    state = begun("list all my memories", asked(ADDRESS_EN))
    assert state.route is not None
    assert (state.route.kind, state.route.resolves, state.route.dropped) == (
        "list_all",
        "pa_0",
        None,
    )


@pytest.mark.parametrize("refusal", ["forget it", "esquece isso", "never mind", "cancel"])
def test_a_refusal_is_no_forget_that_nor_a_cancel(refusal: str) -> None:
    state = begun(refusal, asked(ADDRESS_EN))
    assert state.route is not None and state.route.kind == "model"
    assert state.route.question is not None and not state.route.question.answered


def test_a_message_in_no_language_is_read_in_the_questions() -> None:
    assert begun("12", asked(ADDRESS_PT, "pt")).language == "pt"


def test_once_the_question_expired_the_message_is_only_a_message() -> None:
    _, carried = run(None, arrived("5 Elm Street"), answers(opening=page()))
    assert not any(isinstance(e, effects.ClearPending) for e in carried)


def test_the_decision_prompt_says_whether_the_message_answers() -> None:
    finalize = [ActionSpec(name="Finalize", description="Answer.", ends_cycle=True)]
    for text, said_about in (("5 Elm Street", "answers it"), ("não sei", "does not answer")):
        prompt = decision_prompt(begun(text, asked(ADDRESS_EN)), finalize)
        ask = str(prompt.messages[-1].content)
        assert said_about in ask and str(asked(ADDRESS_EN).asked) in ask


# -- the offline planner saves only an answer, as the asked fact ------------------------------


def request(task: str, context: CycleContext) -> LLMRequest:
    return LLMRequest(
        task=task, prompt=Prompt(system="", messages=[]), input_json=context.model_dump_json()
    )


async def saved(context: CycleContext) -> list[str]:
    try:
        plan = await OfflineModel().reasoning(request("MemorySave", context), SavePlan)
    except LLMOutputError:  # no plan: nothing saved
        return []
    return [str(m.content) for m in plan.memories]


async def planned(text: str, question: str, language: Language = "en") -> tuple[str, list[str]]:
    """What the offline planner does first with ``text`` after its ask, and what a save
    would keep."""
    context = begun(text, asked(question, language)).context()
    actions = ["Finalize", "Question", "MemorySearch", "MemorySave"]
    first = await OfflineModel().reasoning_heavy(request("decide", context), actions)
    return first, await saved(context) if first == "MemorySave" else []


@pytest.mark.parametrize(
    ("text", "question", "language", "fact"),
    [
        ("5 Elm Street, Springfield", ADDRESS_EN, "en", "My address is 5 Elm Street, Springfield"),
        ("Rua das Flores 12, Lisboa", ADDRESS_PT, "pt", "Meu endereço é Rua das Flores 12, Lisboa"),
        ("Lena", "What's my daughter's name?", "en", "My daughter's name is Lena"),
        ("I live at 5 Elm Street", ADDRESS_EN, "en", "I live at 5 Elm Street"),
    ],
)
async def test_an_answer_is_saved_as_the_asked_fact(
    text: str, question: str, language: Language, fact: str
) -> None:
    assert await planned(text, question, language) == ("MemorySave", [fact])


@pytest.mark.parametrize(
    ("text", "question", "language"),
    [
        ("I have no idea, sorry", ADDRESS_EN, "en"),
        ("sorry, I don't know", ADDRESS_EN, "en"),
        ("never mind", ADDRESS_EN, "en"),
        ("The weather is nice today", ADDRESS_EN, "en"),
        ("What time is it?", ADDRESS_EN, "en"),
        ("não sei", ADDRESS_PT, "pt"),
        ("deixa pra lá", ADDRESS_PT, "pt"),
        ("O meu gato chama-se Tareco", ADDRESS_PT, "pt"),
    ],
)
async def test_what_does_not_answer_is_never_saved_as_the_asked_fact(
    text: str, question: str, language: Language
) -> None:
    first, facts = await planned(text, question, language)
    assert not any(f.lower().startswith(("my address", "meu endereço")) for f in facts), facts
    assert all(f == text or text.startswith(f) or f in text for f in facts)  # as itself
    assert first != "MemorySave" or facts
