"""The offline planner's plans fit the memory actions' own schemas, its replies say what
happened in the user's language, and "delete everything" never happens without a "yes"."""

from __future__ import annotations

import json
from typing import TypeVar

import pytest
import tool_history
from pydantic import BaseModel

from memoria_action_worker.actions.memory_delete import DeletePlan
from memoria_action_worker.actions.memory_save import SavePlan
from memoria_action_worker.actions.memory_search import SearchPlan
from memoria_action_worker.actions.memory_update import UpdatePlan
from memoria_contracts.chat import ChatRecord
from memoria_contracts.events import CycleContext, PendingQuestion, StepRecord
from memoria_llm.port import LLMOutputError, Mode
from memoria_offline import LABEL, OfflineModel, replies
from memoria_offline.facts import Relation, fact_of, introduces, relation
from memoria_offline.intents import Intent, Reading, read
from memoria_offline.replies import delete_all_question
from memoria_text.i18n import detect_language

from .cycles import context_for, memory_card, request, run_cycle

MODEL = OfflineModel()
KNOWN = [
    ChatRecord(id="u-0", chat_history=True, modal="text", role="user", content="hi"),
]
"""An earlier turn: the conversation was told that no model answers (no note again)."""


def assistant(text: str) -> ChatRecord:
    return ChatRecord(id="a-1", chat_history=True, modal="text", role="assistant", content=text)


async def spoken(task: str, context: CycleContext, metadata: dict[str, str] | None = None) -> str:
    """What the planner says as the step ``task`` of ``context``."""
    pieces = [p async for p in MODEL.chat(request(task, context, metadata))]
    assert all(pieces)
    return "".join(pieces)


async def reply(task: str, text: str, **results: object) -> str:
    metadata = {"results": json.dumps(results)} if results else {}
    return await spoken(task, context_for(text), metadata)


P = TypeVar("P", SavePlan, SearchPlan, UpdatePlan, DeletePlan)
TASKS: dict[type[BaseModel], str] = {
    SavePlan: "MemorySave",
    SearchPlan: "MemorySearch",
    UpdatePlan: "MemoryUpdate",
    DeletePlan: "MemoryDelete",
}


async def planned(schema: type[P], cycle: CycleContext | str) -> P:
    """The planner's plan for the step ``schema`` is of, in ``cycle`` (or a message's)."""
    context = context_for(cycle) if isinstance(cycle, str) else cycle
    return await MODEL.reasoning(request(TASKS[schema], context), schema)


# -- plans ----------------------------------------------------------------------------------


async def test_a_save_plan_keeps_the_users_words_and_guesses_type_and_keys() -> None:
    plan = await planned(SavePlan, "Remember that I am allergic to peanuts!")
    (memory,) = plan.memories
    assert memory.content == "I am allergic to peanuts"
    assert memory.memory_type == "constraint"
    assert memory.bindings[0] == "I am allergic to peanuts"
    assert {"allergy", "alergia"} <= set(memory.bindings)


@pytest.mark.parametrize(
    ("statement", "memory_type"),
    [
        ("My name is Ana", "user_profile"),
        ("Meu nome é João", "user_profile"),
        ("I love jazz music", "preference"),
        ("Eu gosto de café sem açúcar", "preference"),
        ("I'm planning a trip to Japan in April", "goal"),
        ("Quero aprender a tocar violão", "goal"),
        ("My passport number is X1234567", "critical_info"),
        ("A senha do wifi é girassol42", "critical_info"),
        ("I can't eat gluten", "constraint"),
        ("Sou alérgica a camarão", "constraint"),
    ],
)
def test_memory_types_are_guessed_from_cues(statement: str, memory_type: str) -> None:
    assert fact_of(statement).memory_type == memory_type


def test_a_portuguese_fact_gets_topic_keys_in_both_languages() -> None:
    bindings = fact_of("Meu nome é João").bindings
    assert bindings[0] == "Meu nome é João"
    assert {"nome", "user's name", "meu nome"} <= set(bindings)


@pytest.mark.parametrize("statement", ["I moved to Porto", "Me mudei para o Porto"])
def test_a_move_is_found_by_a_later_question_about_where_the_user_lives(statement: str) -> None:
    """ "Where do I live now?" must find the move, not only the older "I live in Lisbon"."""
    assert {"where I live", "onde eu moro"} <= set(fact_of(statement).bindings)


def test_a_subject_with_digits_or_a_hyphen_is_a_key_of_its_own() -> None:
    assert "e-mail" in fact_of("My e-mail is ana@example.com").bindings
    assert "2 kids" in fact_of("My 2 kids are Rui and Bia").bindings


async def test_a_search_plan_looks_for_the_question_or_lists_everything() -> None:
    semantic = await planned(SearchPlan, "Hi, what is my name?")
    # The question, the key the rules store with every memory about a name, and its subject.
    assert (semantic.queries, semantic.mode) == (
        ["What is my name?", "user's name", "name"],
        "semantic",
    )
    move = await planned(SearchPlan, "I moved to Hamburg last month")
    assert move.queries == [
        "I moved to Hamburg last month",
        "where I live",
        "moved Hamburg last month",
    ]
    # A name asked about is looked for alone: the small embedder scores "Who is Clara?"
    # below its cut-off against "My sister Clara lives in Madrid", "Clara" above it.
    name = await planned(SearchPlan, "Who is Clara?")
    assert name.queries == ["Who is Clara?", "Clara"]
    pt = await planned(SearchPlan, "O que você sabe sobre a Clara?")
    assert pt.queries == ["O que você sabe sobre a Clara?", "Clara"]
    everything = await planned(SearchPlan, "What do you know about me?")
    assert everything.mode == "chronological"


SEARCHED = [StepRecord(step=1, action="MemorySearch", status="ok", summary="found 2")]


def after_search(text: str, *memories: tuple[str, str]) -> CycleContext:
    """The cycle of ``text`` once its search step showed ``memories`` (id, content), in
    that order."""
    cards = [
        memory_card(1, n, memory_id, content) for n, (memory_id, content) in enumerate(memories, 1)
    ]
    return context_for(text, transcript=cards, steps=SEARCHED)


async def test_a_correction_updates_the_best_match_with_the_new_statement() -> None:
    context = after_search(
        "Actually my favourite colour is green", ("mem_blue", "My favourite colour is blue")
    )
    plan = await planned(UpdatePlan, context)
    (update,) = plan.updates
    assert update.memory_id == "mem_blue"
    assert update.content == "My favourite colour is green"


async def test_forgetting_deletes_only_the_best_match() -> None:
    context = after_search(
        "Forget my allergy",
        ("mem_a", "I am allergic to peanuts"),
        ("mem_b", "Allergy season starts in May"),
    )
    plan = await planned(DeletePlan, context)
    assert plan.memory_ids == ["mem_a"]


async def test_a_correction_changes_the_memory_about_its_subject_not_the_top_score() -> None:
    """The small embedder may rank an unrelated memory first; a correction must not
    overwrite it. Here the move ranks first, the allergy second."""
    context = after_search(
        "Na verdade não sou mais alérgica a camarão",
        ("mem_move", "Me mudei para o Porto"),
        ("mem_allergy", "Sou alérgica a camarão"),
    )
    plan = await planned(UpdatePlan, context)
    assert [update.memory_id for update in plan.updates] == ["mem_allergy"]


async def test_a_correction_about_nothing_found_is_saved_and_changes_nothing() -> None:
    unrelated = [("Me mudei para o Porto", 1), ("Meu nome é Carla", 1)]
    actions = await run_cycle("Na verdade não sou mais alérgica a camarão", found=unrelated)
    assert actions == ["MemorySearch", "MemorySave", "Finalize"]


async def test_a_forget_about_nothing_found_deletes_nothing() -> None:
    actions = await run_cycle("Forget my allergy", found=[("I moved to Porto", 1)])
    assert actions == ["MemorySearch", "Finalize"]


@pytest.mark.parametrize(
    ("said", "held"),
    [
        ("Forget my allergy", ["Sou alérgica a camarão"]),  # a topic across languages
        ("Esqueça minha alergia", ["I am allergic to peanuts", "allergy"]),
        ("my favorite colour is green", ["My favourite colour is blue"]),
        ("Remova o número do passaporte", ["My passport number is X1234567"]),
        ("I moved to Porto", ["I live in Lisbon", "where I live"]),
        ("What is my name?", ["I'm Marco"]),  # an introduction is about the name
        ("Qual é o meu nome?", ["Sou a Ana"]),
    ],
)
def test_a_memory_about_the_same_subject_shares_it(said: str, held: list[str]) -> None:
    assert relation(said, held) != Relation.NONE


@pytest.mark.parametrize(
    ("said", "held"),
    [
        ("não sou mais alérgica a camarão", ["Me mudei para o Porto", "where I live"]),
        ("my flight is TP9999", ["My dog is called Rex", "my pet"]),
        ("the wifi password is now moon77", ["I'm planning a trip to Japan"]),
        # The words of a topic key are not the memory's own ("user's name" vs "name").
        ("What's my daughter's name?", ["I'm Nina", "user's name", "meu nome", "i'm nina"]),
    ],
)
def test_a_memory_about_something_else_does_not(said: str, held: list[str]) -> None:
    assert relation(said, held) == Relation.NONE


async def test_no_plan_is_an_output_error_not_a_guess() -> None:
    with pytest.raises(LLMOutputError):
        await planned(DeletePlan, "Forget my allergy")


# -- delete everything ----------------------------------------------------------------------


async def test_delete_everything_asks_first_and_only_a_yes_to_that_question_deletes() -> None:
    assert await run_cycle("Forget everything") == ["Question"]
    asked = [assistant(delete_all_question("en"))]
    assert await run_cycle("yes", history=asked, found_per_search=(3, 2, 0)) == [
        "MemorySearch",
        "MemoryDelete",
        "MemorySearch",
        "MemoryDelete",
        "MemorySearch",
        "Finalize",
    ]
    assert await run_cycle("yes") == ["Finalize"]  # a "yes" to nothing deletes nothing
    assert await run_cycle("no", history=asked) == ["Finalize"]


async def test_a_tool_record_after_the_question_does_not_hide_it() -> None:
    """Steps are in the history as tool calls and results; they are not something the
    assistant said, so the question before them still counts."""
    call = tool_history.call("c", 1, "MemorySearch")
    result = tool_history.result("c", 1, "MemorySearch", "found 0 memories")
    asked = [assistant(delete_all_question("en")), call, result]
    # Confirmed: it searches what to delete (nothing here) instead of a bare Finalize.
    assert await run_cycle("yes", history=asked, found_per_search=(0,)) == [
        "MemorySearch",
        "Finalize",
    ]


async def test_a_confirmed_delete_everything_deletes_what_each_round_found() -> None:
    asked = [assistant(delete_all_question("pt"))]
    steps = [
        StepRecord(step=1, action="MemorySearch", status="ok", summary="found 2"),
    ]
    context = context_for(
        "sim",
        history=asked,
        transcript=[memory_card(1, 1, "mem_a", "a"), memory_card(1, 2, "mem_b", "b")],
        steps=steps,
    )
    plan = await planned(DeletePlan, context)
    assert plan.memory_ids == ["mem_a", "mem_b"]
    search = await planned(SearchPlan, context)
    assert (search.mode, search.limit) == ("chronological", 100)


# -- replies --------------------------------------------------------------------------------


async def told(task: str, text: str, **results: object) -> str:
    """What the planner says in a conversation that already knows no model answers."""
    metadata = {"results": json.dumps(results)} if results else {}
    return await spoken(task, context_for(text, history=KNOWN), metadata)


async def test_explanations_tell_back_what_memory_holds_in_the_second_person() -> None:
    found = [{"memory_id": "mem_a", "content": "I am allergic to peanuts"}]
    answer = await told("MemorySearch", "what am I allergic to?", found=found, looked_for=["x"])
    assert answer == "You are allergic to peanuts."
    found_pt = [{"memory_id": "mem_a", "content": "Sou alérgica a amendoim"}]
    pt = await told("MemorySearch", "do que eu tenho alergia?", found=found_pt, looked_for=["x"])
    assert pt == "Você é alérgica a amendoim."
    nothing = await told(
        "MemorySearch", "where is the party?", found=[], looked_for=["where is the party?", "x"]
    )
    # The user's words, not the topic keys the rules added to them; a question about the
    # world says that only a model could answer it.
    assert nothing == (
        'I have nothing about "where is the party?" in your memories, and with no language '
        "model configured I can only answer from what you told me."
    )
    saved = await told(
        "MemorySave", "lembre que moro em Lisboa", saved=[{"content": "Moro em Lisboa"}]
    )
    assert saved == "Anotado: você mora em Lisboa."


async def test_a_code_or_a_password_is_repeated_exactly_in_quotation_marks() -> None:
    found = [{"memory_id": "mem_a", "content": "My wifi password is sunflower42"}]
    answer = await told("MemorySearch", "what is my wifi password?", found=found)
    assert answer == 'Your wifi password is "sunflower42".'
    flight = [{"memory_id": "mem_f", "content": "My flight is TP1234 on 2026-12-03"}]
    said = await told("MemorySearch", "when is my flight?", found=flight)
    assert said == 'Your flight is "TP1234" on 2026-12-03.'


async def test_several_memories_read_as_a_sentence_or_a_short_list() -> None:
    two = [
        {"memory_id": "m1", "content": "I drink coffee every morning"},
        {"memory_id": "m2", "content": "I drink wine on Fridays"},
    ]
    answer = await told("MemorySearch", "what do I drink?", found=two)
    assert answer == "You drink coffee every morning, and you drink wine on Fridays."
    everything = [*two, {"memory_id": "m3", "content": "Moro em Lisboa"}]
    listed = await told(
        "MemorySearch", "what do you know about me?", found=everything, mode="chronological"
    )
    assert listed == (
        "Here is what I know about you:\n- You drink coffee every morning\n"
        "- You drink wine on Fridays\n- Você mora em Lisboa"
    )


async def test_nothing_told_in_a_window_says_so_not_that_memory_is_empty() -> None:
    window = {"since": "2026-11-16T00:00:00+00:00", "until": "2026-11-23T00:00:00+00:00"}
    nothing = await told(
        "MemorySearch", "What did I tell you last week?", found=[], mode="chronological", **window
    )
    assert nothing == "Nothing you told me in that time (2026-11-16 – 2026-11-22) is in memory."
    nada = await told(
        "MemorySearch",
        "o que eu te disse ontem?",
        found=[],
        mode="chronological",
        until=window["until"],
    )
    assert nada == "Nada do que você me disse nesse período (– 2026-11-22) está na memória."


async def test_a_search_answer_names_the_memories_about_the_question() -> None:
    """Search favours recall; the answer, like a model reading the results, names only the
    memories about what was asked, and all of them as the closest when none is."""
    found = [
        {"memory_id": "mem_wife", "content": "My wife Ana was born on March 3"},
        {"memory_id": "mem_allergy", "content": "I am allergic to peanuts"},
    ]
    answer = await reply("MemorySearch", "What am I allergic to?", found=found, looked_for=["x"])
    assert answer.startswith("You are allergic to peanuts.")
    pt = await told("MemorySearch", "Do que eu tenho alergia?", found=found, looked_for=["x"])
    assert pt == "You are allergic to peanuts."
    where = await told("MemorySearch", "Where is the party?", found=found, looked_for=["x"])
    # Nothing about it: the best found, as the closest rather than as the answer.
    assert where == (
        'Nothing I have is clearly about "where is the party?". The closest: '
        "your wife Ana was born on March 3."
    )
    pt = await told("MemorySearch", "Onde é a festa?", found=found[:1], looked_for=["x"])
    assert pt.startswith('Nada do que tenho é claramente sobre "onde é a festa?"')
    # About the user: no answer, the user is asked for it (the question is the answer).
    assert await told("MemorySearch", "Where do I live?", found=found) == ""


async def test_a_save_of_what_memory_already_held_says_so() -> None:
    known = [{"memory_id": "mem_a", "content": "I'm Marco"}]
    new = [{"memory_id": "mem_b", "content": "I live in Berlin"}]
    answer = await told(
        "MemorySave", "I'm Marco and I live in Berlin", saved=new, already_saved=known
    )
    assert answer == "Noted: you live in Berlin. I already knew that: you're Marco."
    pt = await told("MemorySave", "Sou o Marco", saved=[], already_saved=known)
    assert pt == "Isso eu já sabia: you're Marco."


@pytest.mark.parametrize(
    "said",
    [
        "Forget my passport",
        "Esqueça meu passaporte",
        "Actually my passport number is X1",
        "Forget Ana's birthday",
        "Forget my allergy",
    ],
)
async def test_a_search_for_what_to_change_says_nothing_of_its_own(said: str) -> None:
    """Before a forget or a correction, the search's answer is not the memories it happened
    to find: naming them read as if they were about to be changed, and a second message
    before the one that says what changed made two answers of one turn."""
    found = [
        {"memory_id": "mem_name", "content": "Meu nome é Zoe e moro em Lisboa"},
        {"memory_id": "mem_allergy", "content": "I am allergic to peanuts"},
    ]
    assert await reply("MemorySearch", said, found=found, looked_for=["x"]) == ""


async def test_the_first_answer_of_a_conversation_says_that_no_language_model_answers() -> None:
    hello = await reply("Finalize", "Hello!")
    assert "No language model is answering" in hello
    assert "remember" in hello  # tells the user what it can do
    assert "Nenhum modelo de linguagem" in await reply("Finalize", "Olá, tudo bem?")
    assert MODEL.label(Mode.CHAT) == LABEL == "offline planner (no LLM)"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Forget my allergy", 'I found no memory about "my allergy", so I forgot nothing.'),
        ("Esqueça minha alergia", 'Não encontrei nenhuma memória sobre "minha alergia"'),
    ],
)
async def test_a_forget_that_found_nothing_about_its_subject_says_so(
    text: str, expected: str
) -> None:
    context = after_search(text, ("mem_move", "I moved to Porto"))
    assert (await spoken("Finalize", context)).startswith(expected)


async def test_the_no_model_note_is_said_once_per_conversation_in_the_answer() -> None:
    """Every answer's label says "no LLM" (a badge in the clients); the answer itself says it
    once, in the first turn, and the turn is one message: no closing after a step's answer."""
    saved = [StepRecord(step=1, action="MemorySave", status="ok", summary="saved 1")]
    results = {"results": json.dumps({"saved": [{"content": "I like tea"}]})}

    async def answer(text: str, history: list[ChatRecord]) -> tuple[str, str]:
        said = await spoken("MemorySave", context_for(text, history=history), results)
        closing = await spoken("Finalize", context_for(text, history=history, steps=saved))
        return said, closing

    first, closing = await answer("Remember that I like tea", [])
    assert first.startswith("Noted: you like tea.\n\n(No language model is answering")
    assert closing == ""
    # The planner's answers are history, under its label: said already.
    explained = assistant("Noted: you like tea.").model_copy(update={"model": LABEL})
    assert await answer("Remember that I like tea", [explained]) == ("Noted: you like tea.", "")
    # A closing is not history, but the user's earlier turn shows the thread was told.
    assert await answer("Remember that I like tea", [said("user", "hi", 1)]) == (
        "Noted: you like tea.",
        "",
    )
    # Another model's answers earlier in the thread (a key was set then) do not count.
    by_gemini = explained.model_copy(update={"model": "gemini-2.5-flash"})
    assert "No language model" in (await answer("Remember that I like tea", [by_gemini]))[0]


async def test_the_delete_everything_question_is_asked_in_the_users_language() -> None:
    assert "TODAS as suas memórias" in await reply("Question", "apague todas as minhas memórias")
    assert read("yes").intent == Intent.CONFIRM


@pytest.mark.parametrize(
    "statement",
    [
        "My e-mail is ana@example.com",  # a hyphen in the subject
        "My 2 kids are Rui and Bia",  # a digit in the subject
        "I'm 34 years old",  # a number of more than one digit
        "Tenho 34 anos",
        "I have 12 plants",
        "I started a new job at Google",
        "Sou alérgica a camarão",  # the whole word, in either gender
        "Sou vegano",
        "Sou casada",
        "I’m allergic to peanuts",  # the apostrophe phones type
        "Hi, I'm Marco",  # an introduction: a capitalised name after "I'm"
        "Sou o Marco",
        "Me chamo Ana",
        "My daughter Lena turns 7 on March 3rd",  # family, said without "is"
        "Minha filha Lena faz 7 anos em março",
        "Lena's birthday is on March 3rd",
        "Julia is my wife",
        "We have a dog named Rex",
        "I used to live in Lisbon",
        "I need to buy milk",
        "Sou médico",
        "Eu nasci em 1990",
        "Não gosto de cogumelos",  # a negation, not a denial
        "I broke up with my girlfriend",
        "We got a new puppy called Bolt",
        "I'm pregnant",
        "Estou grávida",
        "Troquei de emprego",
    ],
)
def test_plain_first_person_facts_are_kept(statement: str) -> None:
    assert read(statement).intent == Intent.SAVE


@pytest.mark.parametrize(
    "statement",
    ["I'm tired", "I'm fine", "It's raining", "That's great", "This is my question", "Sou eu"],
)
def test_how_the_user_feels_is_not_a_fact_to_keep(statement: str) -> None:
    assert read(statement).intent == Intent.SMALL_TALK


async def test_facts_joined_in_one_message_are_saved_as_memories_of_their_own() -> None:
    plan = await planned(SavePlan, "Hi, I'm Marco and I live in Berlin.")
    name, home = plan.memories
    assert (name.content, home.content) == ("I'm Marco", "I live in Berlin")
    assert "user's name" in name.bindings
    assert "where I live" in home.bindings
    pt = await planned(SavePlan, "Sou o Marco, moro em Berlim")
    assert [m.content for m in pt.memories] == ["Sou o Marco", "Moro em Berlim"]
    two = await planned(SavePlan, "Sou alérgica a camarão e adoro café")
    assert [m.content for m in two.memories] == ["Sou alérgica a camarão", "Adoro café"]
    assert two.memories[0].memory_type == "constraint"


@pytest.mark.parametrize(
    "statement", ["Remember that I like tea and coffee", "I live where I work and study"]
)
async def test_a_clause_that_is_no_fact_of_its_own_keeps_the_statement_whole(
    statement: str,
) -> None:
    plan = await planned(SavePlan, statement)
    assert len(plan.memories) == 1


@pytest.mark.parametrize(
    "statement",
    [
        "I'm a software engineer in Lisbon",
        "I am an engineer",
        "I'm a retired high school teacher",
        "Sou professora de matemática",
        "Sou cirurgiã",
    ],
)
def test_an_occupation_the_user_names_is_their_job(statement: str) -> None:
    """ "Where do I work?" / "qual é a minha profissão?" share no word with it."""
    assert {"my job", "meu trabalho"} <= set(fact_of(statement).bindings)
    assert relation("Where do I work?", [statement]) == Relation.TOPIC
    assert relation("Qual é a minha profissão?", [statement]) == Relation.TOPIC
    assert relation("What do I do?", [statement]) == Relation.TOPIC
    assert relation("O que eu faço?", [statement]) == Relation.TOPIC


@pytest.mark.parametrize("statement", ["My wife is a nurse", "I'm a vegetarian"])
def test_someone_elses_occupation_or_a_diet_is_not_the_users_job(statement: str) -> None:
    assert "my job" not in fact_of(statement).bindings


@pytest.mark.parametrize("statement", ["I'm Brazilian", "I'm Jewish", "Sou Portuguesa"])
def test_a_nationality_or_a_faith_is_not_a_name(statement: str) -> None:
    assert not introduces(statement)
    assert "user's name" not in fact_of(statement).bindings


def test_a_family_fact_is_found_by_its_topics() -> None:
    bindings = fact_of("My daughter Lena turns 7 on March 3rd").bindings
    assert {"birthday", "my family"} <= set(bindings)
    for relative in ("My kids are Ana and Rui", "My sister Clara lives in Madrid", "Meus filhos"):
        assert "my family" in fact_of(relative).bindings


@pytest.mark.parametrize(
    ("question", "held"),
    [
        ("What are my kids' names?", "My kids are Ana and Rui"),
        ("Where does my brother live?", "My brother lives in Faro"),
        ("Who is my girlfriend?", "Mara is my girlfriend"),
    ],
)
async def test_a_question_about_a_relative_is_answered_by_the_memory_about_them(
    question: str, held: str
) -> None:
    """ "kids'" once kept its apostrophe, and kids, brothers and partners were no family."""
    assert relation(question, [held]) != Relation.NONE
    assert await run_cycle(question, found=[(held, 1)]) == ["MemorySearch", "Finalize"]


@pytest.mark.parametrize(
    ("said", "held"),
    [
        ("I moved to Hamburg last month.", "I live in Berlin"),
        ("Me mudei para o Porto", "Moro em Lisboa"),
        ("I'm no longer allergic to penicillin", "I'm allergic to penicillin"),
        ("Não sou mais vegetariana", "Sou vegetariana"),
    ],
)
async def test_a_move_or_a_fact_no_longer_true_replaces_the_memory_about_it(
    said: str, held: str
) -> None:
    assert await run_cycle(said, found=[(held, 1)]) == ["MemorySearch", "MemoryUpdate", "Finalize"]
    unrelated = [("My dog is called Rex", 1)]
    assert await run_cycle(said, found=unrelated) == ["MemorySearch", "MemorySave", "Finalize"]


@pytest.mark.parametrize(
    ("said", "held"),
    [
        ("I moved to Hamburg last month", "I moved to Hamburg last month"),
        ("Actually, I live in Porto", "I live in porto."),
    ],
)
async def test_a_move_or_correction_told_twice_changes_nothing(said: str, held: str) -> None:
    """It was an update of a memory into itself ("X" → "X"); the save says "I already had
    that" instead (the memory service finds the memory that says it)."""
    assert await run_cycle(said, found=[(held, 1)]) == ["MemorySearch", "MemorySave", "Finalize"]


async def test_a_correction_differing_only_where_the_memory_service_sees_it_updates() -> None:
    """ "Moro em São Paulo" is not what "Moro em Sao Paulo" says to the memory service (its
    content key keeps accents): a save would keep both, so it is an update."""
    actions = await run_cycle("Na verdade moro em São Paulo", found=[("Moro em Sao Paulo", 1)])
    assert actions == ["MemorySearch", "MemoryUpdate", "Finalize"]


async def test_a_correction_keeps_the_topics_of_the_memory_it_replaces() -> None:
    """ "What is my job?" must still find the job once it no longer says "work"."""
    context = after_search(
        "Actually I'm not a nurse anymore, I'm a paramedic now",
        ("mem_job", "I work as a nurse at the Charité hospital"),
    )
    plan = await planned(UpdatePlan, context)
    (update,) = plan.updates
    assert {"my job", "meu trabalho"} <= set(update.bindings or [])


async def test_a_search_answer_reads_the_found_memories_keys() -> None:
    found = [
        {"memory_id": "mem_home", "content": "I moved to Hamburg last month"},
        {"memory_id": "mem_job", "content": "I'm not a nurse anymore, I'm a paramedic now"},
    ]
    keys = {"mem_home": ["where I live"], "mem_job": ["my job", "meu trabalho"]}
    metadata = {
        "results": json.dumps({"found": found, "looked_for": ["What is my job?"]}),
        "bindings": json.dumps(keys),
    }
    text = await spoken("MemorySearch", context_for("What is my job?", history=KNOWN), metadata)
    assert text == "You're not a nurse anymore, you're a paramedic now."


@pytest.mark.parametrize(
    ("message", "statement"),
    [
        ("Can you remember that my car is a blue Golf?", "My car is a blue Golf"),
        ("Pode lembrar que eu moro no Porto?", "Eu moro no Porto"),
        ("Remind me to call mom tomorrow", "Call mom tomorrow"),
    ],
)
def test_a_request_to_remember_asked_as_a_question_saves(message: str, statement: str) -> None:
    assert read(message) == Reading(Intent.SAVE, statement, facts=(statement,))


@pytest.mark.parametrize(
    "message", ["Can you remember my passport number?", "Pode lembrar meu passaporte?"]
)
def test_can_you_remember_without_that_asks_to_recall(message: str) -> None:
    assert read(message).intent == Intent.SEARCH


def test_an_infinitive_is_a_request_to_save_only_after_pode() -> None:
    assert read("Lembrar de algo").intent == Intent.SMALL_TALK


def said(role: str, text: str, n: int) -> ChatRecord:
    return ChatRecord(id=f"h-{n}", chat_history=True, modal="text", role=role, content=text)


def asked_back(question: str) -> list[ChatRecord]:
    """The turn where the planner found nothing and asked the user to tell it."""
    ask = replies.text("ask_missing", detect_language(question))
    return [
        said("user", question, 1),
        said("assistant", "I found nothing about it in your memories.", 2),
        said("assistant", ask, 3),
    ]


def pending(question: str, *, answered: bool) -> PendingQuestion:
    """That ask as decision hands it over with the next message, and its reading of it."""
    ask = replies.text("ask_missing", detect_language(question))
    return PendingQuestion(user_question=question, assistant_question=ask, answered=answered)


@pytest.mark.parametrize(
    ("question", "answer", "fact"),
    [
        ("What's my daughter's name?", "Lena", "My daughter's name is Lena"),
        ("Where do I live?", "in Porto.", "I live in Porto"),
        ("What's the wifi password?", "sunflower42", "What's the wifi password? sunflower42"),
        ("Qual é o meu nome?", "Ana", "Meu nome é Ana"),
        ("Onde eu moro?", "no Porto", "Moro no Porto"),
        ("Qual é o nome da minha filha?", "Lena", "O nome da minha filha é Lena"),
        ("Como se chama meu cachorro?", "Thor", "Meu cachorro se chama Thor"),
        ("What is the name of my dog?", "Rex", "My dog's name is Rex"),
        (
            "What is my address?",
            "5 Elm Street, Springfield",
            "My address is 5 Elm Street, Springfield",
        ),
        (
            "Qual é o meu endereço?",
            "Rua das Flores 12, Lisboa",
            "Meu endereço é Rua das Flores 12, Lisboa",
        ),
    ],
)
async def test_a_short_reply_to_could_you_tell_me_is_saved_as_the_answer(
    question: str, answer: str, fact: str
) -> None:
    history, asked = asked_back(question), pending(question, answered=True)
    assert await run_cycle(answer, history=history, question=asked) == ["MemorySave", "Finalize"]
    plan = await planned(SavePlan, context_for(answer, history=history, question=asked))
    assert [m.content for m in plan.memories] == [fact]


@pytest.mark.parametrize(
    "reply_text",
    [
        *("I don't know", "não sei", "thanks!", "never mind", "I have no idea, sorry"),
        *("The weather is nice today", "O meu gato chama-se Tareco", "deixa pra lá"),
    ],
)
async def test_a_reply_that_answers_nothing_is_not_saved_as_the_answer(reply_text: str) -> None:
    """Decision reads these as no answer: none becomes "My address is …"."""
    question = "What is my address?"
    history, asked = asked_back(question), pending(question, answered=False)
    context = context_for(reply_text, history=history, question=asked)
    if "MemorySave" in await run_cycle(reply_text, history=history, question=asked):
        plan = await planned(SavePlan, context)
        assert all("address" not in str(m.content).lower() for m in plan.memories)


async def test_the_planner_no_longer_guesses_a_question_from_the_history() -> None:
    """Only decision's hand-over says a question is open: an ask in the history whose
    question expired (nothing handed over) makes a word no answer."""
    history = asked_back("What's my daughter's name?")
    assert await run_cycle("Lena", history=history) == ["Finalize"]


@pytest.mark.parametrize(
    "message",
    [
        "I drink coffee every morning",
        "I usually cycle to work",
        "I take vitamin D daily",
        "My coffee: black, no sugar",
        "Costumo correr de manhã",
        "Eu bebo chá verde todo dia",
        "I'm not a fan of horror movies",
        "I'm afraid of heights",
        "Dou aulas de inglês",
        "Não sou fã de filmes de terror",
        "Tenho medo de altura",
        "Eu não fumo",
    ],
)
def test_an_everyday_fact_in_the_first_person_is_kept(message: str) -> None:
    """These got the help text and were lost: no rule had their verb."""
    assert read(message).intent == Intent.SAVE


@pytest.mark.parametrize(
    "statement", ["I teach piano on weekends", "I run a small bakery", "Dou aulas de inglês"]
)
def test_what_the_user_does_for_a_living_is_their_job(statement: str) -> None:
    assert relation("What do I do?", [statement]) == Relation.TOPIC


@pytest.mark.parametrize(
    "message",
    [
        *("I think so", "I see", "I know", "I hope so", "I love you", "I agree", "I miss you"),
        *("Não tenho certeza", "Não sei"),
    ],
)
def test_what_is_said_in_conversation_is_not_kept(message: str) -> None:
    assert read(message).intent == Intent.SMALL_TALK


@pytest.mark.parametrize(
    ("message", "intent", "statement"),
    [
        ("Thanks! Remember that I like tea", Intent.SAVE, "I like tea"),
        ("Hey there! My name is Jonas.", Intent.SAVE, "My name is Jonas"),
        ("Bom dia! Meu nome é Ana", Intent.SAVE, "Meu nome é Ana"),
        ("Hi, how are you? I'm Ana", Intent.SAVE, "I'm Ana"),
        ("Great, my wife is called Ana", Intent.SAVE, "My wife is called Ana"),
        ("Good morning, I moved to Porto", Intent.UPDATE, "I moved to Porto"),
        ("thanks, what is my name?", Intent.SEARCH, "What is my name?"),
    ],
)
def test_courtesy_before_a_request_is_not_the_request(
    message: str, intent: Intent, statement: str
) -> None:
    """ "Thanks! Remember that…" was small talk, and the fact was lost."""
    reading = read(message)
    assert (reading.intent, reading.statement) == (intent, statement)


@pytest.mark.parametrize(
    ("message", "answer"),
    [
        ("Thanks!", "You're welcome!"),
        ("ok thank you so much", "You're welcome!"),
        ("Obrigada!", "De nada!"),
        ("Bye", "Bye! Your memories stay saved here."),
        ("Tchau, até amanhã", "Tchau! Suas memórias ficam guardadas aqui."),
        ("thank you, good night", "You're welcome! Bye! Your memories stay saved here."),
    ],
)
async def test_thanks_and_goodbye_are_answered_in_kind(message: str, answer: str) -> None:
    assert await run_cycle(message) == ["Finalize"]
    assert await spoken("Finalize", context_for(message, history=KNOWN)) == answer
    # Even right after the planner asked for something it lacked.
    question = "What's my daughter's name?"
    asked = context_for(
        message, history=asked_back(question), question=pending(question, answered=False)
    )
    assert await spoken("Finalize", asked) == answer


@pytest.mark.parametrize("message", ["Nice to meet you", "Thanks for remembering"])
async def test_courtesy_is_no_answer_to_a_question_asked_back(message: str) -> None:
    question = "What's my daughter's name?"
    history, asked = asked_back(question), pending(question, answered=False)
    assert await run_cycle(message, history=history, question=asked) == ["Finalize"]


async def test_i_dont_know_to_its_question_gets_no_help_text() -> None:
    question = "What's my daughter's name?"
    context = context_for(
        "I don't know", history=asked_back(question), question=pending(question, answered=False)
    )
    closing = await spoken("Finalize", context)
    assert closing == "All right. Tell me whenever you like, and I will remember it."


async def test_a_word_is_no_answer_when_nothing_was_asked() -> None:
    history = [said("user", "What's my daughter's name?", 1), said("assistant", "Lena.", 2)]
    assert await run_cycle("Lena", history=history) == ["Finalize"]


@pytest.mark.parametrize(
    ("question", "held", "expected"),
    [
        # Found, but about something else: ask the user, as when nothing was found.
        ("Where do I live?", "My daughter's name is Lena", ["MemorySearch", "Question"]),
        ("Onde eu moro?", "Meu nome é Ana", ["MemorySearch", "Question"]),
        ("What do I do for a living?", "I work as a nurse", ["MemorySearch", "Finalize"]),
        ("What do I do for a living?", "Moro em Lisboa", ["MemorySearch", "Question"]),
        ("Where do I live?", "I moved to Porto", ["MemorySearch", "Finalize"]),
    ],
)
async def test_a_question_about_the_user_asks_back_when_nothing_found_is_about_it(
    question: str, held: str, expected: list[str]
) -> None:
    assert await run_cycle(question, found=[(held, 1)]) == expected


@pytest.mark.parametrize(
    ("message", "statement"),
    [
        ("No, my name is Marco", "My name is Marco"),
        ("That's wrong, I live in Porto", "I live in Porto"),
        ("Não, eu moro no Porto", "Eu moro no Porto"),
    ],
)
def test_a_denial_before_a_fact_corrects_it(message: str, statement: str) -> None:
    assert read(message) == Reading(Intent.UPDATE, statement)


@pytest.mark.parametrize("message", ["No", "No thanks", "No, I don't want that", "Não gosto"])
def test_a_denial_before_no_fact_corrects_nothing(message: str) -> None:
    assert read(message).intent != Intent.UPDATE


@pytest.mark.parametrize(
    "message", ["Tell me everything", "what do you remember?", "O que você sabe?"]
)
def test_what_do_you_know_lists_everything(message: str) -> None:
    assert read(message).intent == Intent.LIST_ALL
    assert read("what do you remember about my wife?").intent == Intent.SEARCH


def test_an_age_is_found_by_a_question_about_it_in_either_language() -> None:
    assert relation("How old am I?", ["I'm 34"]) != Relation.NONE
    assert relation("Quantos anos eu tenho?", ["I'm 34", "age", "idade"]) != Relation.NONE
    assert "age" in fact_of("Tenho 34 anos").bindings
    # A daughter's age is not the user's: her memory is keyed by birthday, not by age.
    assert "age" not in fact_of("Minha filha Bia faz 7 anos").bindings


async def test_a_memory_sharing_the_questions_topic_outranks_one_sharing_a_word() -> None:
    found = [
        {"memory_id": "mem_mia", "content": "My daughter's name is Mia"},
        {"memory_id": "mem_nina", "content": "I'm Nina"},
    ]
    answer = await told("MemorySearch", "What's my name?", found=found, looked_for=["x"])
    assert answer == "You're Nina."
    # The daughter's name is still the answer about the daughter.
    daughter = await told(
        "MemorySearch", "What's my daughter's name?", found=found, looked_for=["x"]
    )
    assert daughter == "Your daughter's name is Mia."


async def test_a_forget_takes_the_memory_of_its_topic_over_a_better_ranked_word_match() -> None:
    context = after_search(
        "Forget my name", ("mem_mia", "My daughter's name is Mia"), ("mem_nina", "I'm Nina")
    )
    plan = await planned(DeletePlan, context)
    assert plan.memory_ids == ["mem_nina"]


@pytest.mark.parametrize(
    ("message", "answer", "forgotten"),
    [
        ("Forget that", 'Saved: "I like tea".', "I like tea"),
        ("undo", 'Saved: "I\'m Marco"; "I live in Berlin".', "I live in Berlin"),
        ("Esqueça isso", 'Atualizei: "Moro em Lisboa" → "Moro no Porto".', "Moro no Porto"),
        ("Delete that", 'Saved: "I like green tea". I could not save "Y".', "I like green tea"),
    ],
)
async def test_forget_that_forgets_what_the_previous_answer_saved(
    message: str, answer: str, forgotten: str
) -> None:
    history = [said("user", "…", 1), said("assistant", answer, 2)]
    search = await planned(SearchPlan, context_for(message, history=history))
    assert search.queries[0] == forgotten
    actions = await run_cycle(message, history=history, found=[(forgotten, 1)])
    assert actions == ["MemorySearch", "MemoryDelete", "Finalize"]


FINALIZED = [StepRecord(step=1, action="Finalize", status="ok", summary="answered")]


@pytest.mark.parametrize(
    ("message", "turns"),
    [
        ("Forget that", [("what do I like?", 'From your memories: "I like tea".')]),  # a search
        (
            "forget it",
            [("where do I live?", "I don't have that in my memory yet. Could you tell me?")],
        ),
        ("esquece isso", [("oi", "Olá!")]),  # small talk
        ("delete that", []),  # nothing at all
    ],
)
async def test_forget_that_with_nothing_told_asks_what_instead_of_searching_the_words(
    message: str, turns: list[tuple[str, str]]
) -> None:
    """It searched memories for the words "Forget that" (and forgot whatever matched)."""
    history = [
        said(role, text, 2 * n + i)
        for n, (asked, answered) in enumerate(turns)
        for i, (role, text) in enumerate((("user", asked), ("assistant", answered)))
    ]
    actions = await run_cycle(message, history=history, found=[("I like tea", 1)])
    assert actions == ["Finalize"]
    context = context_for(message, history=history, steps=FINALIZED)
    closing = await spoken("Finalize", context)
    assert closing.startswith(replies.text("ask_what_to_forget", context.language))


async def test_forget_that_after_a_question_forgets_what_the_user_told_before_it() -> None:
    history = [
        said("user", "I like tea", 1),
        said("assistant", 'Saved: "I like tea".', 2),
        said("user", "what do I like?", 3),
        said("assistant", 'From your memories: "I like tea".', 4),
    ]
    search = await planned(SearchPlan, context_for("Forget that", history=history))
    assert search.queries[0] == "I like tea"
    actions = await run_cycle("Forget that", history=history, found=[("I like tea", 1)])
    assert actions == ["MemorySearch", "MemoryDelete", "Finalize"]


async def test_forget_it_after_the_delete_everything_question_is_a_no() -> None:
    history = [
        said("user", "forget everything", 1),
        said("assistant", delete_all_question("en"), 2),
    ]
    assert await run_cycle("forget it", history=history) == ["Finalize"]
    context = context_for("forget it", history=history, steps=FINALIZED)
    assert await spoken("Finalize", context) == "Okay, I kept all your memories."
