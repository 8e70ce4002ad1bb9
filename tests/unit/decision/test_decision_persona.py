"""The decision prompt speaks as the cycle's persona: the hard reset in the cycle after
a switch, worded for the decision's model, and the plain identity otherwise; the persona
travels to the workers in the cycle's context."""

from __future__ import annotations

from memoria_contracts.chat import ChatRecord
from memoria_contracts.events import ActionSpec
from memoria_contracts.personas import ActivePersona, PersonaReset
from memoria_decision.chooser import SYSTEM, decision_prompt
from memoria_decision.core.state import CycleState
from memoria_runtime.personas import load_personas
from memoria_runtime.session_defaults import session_defaults
from memoria_runtime.settings import Settings

SETTINGS = Settings.load(_env_file=None)
COACH = load_personas(SETTINGS.cycle).get("coach")
CATALOG = [ActionSpec(name="Finalize", description="Answer.", ends_cycle=True)]


def state(persona: ActivePersona | None) -> CycleState:
    message = ChatRecord(
        id="msg_1", cycle_id="cyc_1", chat_history=True, modal="text", role="user", content="hi"
    )
    return CycleState(
        cycle_id="cyc_1",
        user_id="ana",
        thread_id="t1",
        message_id="msg_1",
        trace={},
        language="en",
        original=message,
        started_at=message.created_at,
        transcript=(message,),
        session=session_defaults(SETTINGS, "t1"),
        persona=persona,
    )


def test_after_a_switch_the_decision_gets_the_reset_for_its_model() -> None:
    assert COACH is not None
    reset = PersonaReset(seq=2, previous_id="tutor", previous_name="Ada the Tutor", turn=0)
    switched = state(ActivePersona(persona=COACH, reset=reset))
    gemini = decision_prompt(switched, CATALOG, model="gemini-2.5-pro", provider="gemini")
    assert gemini.system.startswith(
        "ROLE ASSIGNMENT - apply before anything else.\nYou are Leo the Coach. "
        "You are NOT Ada the Tutor"
    )
    assert SYSTEM in gemini.system  # the decision's own task follows the identity
    # No "reply as" line in the ask: the decision answers with an action name.
    assert "Reply as" not in gemini.messages[-1].content
    assert gemini.messages[-1].content.endswith("Reply with exactly one of: Finalize")
    claude = decision_prompt(switched, CATALOG, model="claude-opus-4-1")
    assert claude.system.startswith("<system_reset>")
    assert switched.context().persona == switched.persona  # sent to the workers


def test_without_a_switch_only_the_identity() -> None:
    assert COACH is not None
    prompt = decision_prompt(state(ActivePersona(persona=COACH)), CATALOG, model="gpt-4o")
    assert prompt.system.startswith("# Identity\nYou are Leo, a direct productivity coach.")
    assert "Persona switch" not in prompt.messages[-1].content
    older = decision_prompt(state(None), CATALOG, model="gpt-4o")  # a state of an older version
    assert older.system.startswith(SYSTEM)
