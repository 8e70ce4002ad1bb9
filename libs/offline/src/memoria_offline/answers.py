"""A short reply to the planner's own "could you tell me?" turned into a statement to keep.

"What's my daughter's name?" → (nothing in memory, the planner asks) → "Lena" becomes "My
daughter's name is Lena": the fact the question was after, in words a later question finds.
Questions with no template keep both halves ("What's the wifi password? sunflower42")."""

from __future__ import annotations

import re
from typing import Final

from memoria_text.folding import strip_edges, tidy

_E: Final = "(?:é|e)"
# "Where do I live?" "in Porto": the template's preposition gives way to the user's own.
_TWO_PREPOSITIONS: Final = re.compile(
    r"\b(?:in|at|em) (?=(?:in|at|on|em|no|na|nos|nas)\b)", re.IGNORECASE
)
# (question pattern, statement template); the answer goes where {answer} is.
_TEMPLATES: Final[tuple[tuple[re.Pattern[str], str], ...]] = tuple(
    (re.compile(pattern, re.IGNORECASE), template)
    for pattern, template in (
        (r"^(?:what's|whats|what is) my (?P<s>.+?)$", "My {s} is {answer}"),
        (r"^what are my (?P<s>.+?)$", "My {s} are {answer}"),
        (r"^when is my (?P<s>.+?)$", "My {s} is {answer}"),
        (r"^(?:what's|whats|what is) the name of my (?P<s>.+?)$", "My {s}'s name is {answer}"),
        (r"^where do i live$", "I live in {answer}"),
        (r"^where do i work$", "I work at {answer}"),
        (r"^what am i allergic to$", "I am allergic to {answer}"),
        (
            rf"^qual {_E}? ?o nome d(?P<a>o|a) (?P<p>meu|minha) (?P<s>.+?)$",
            "O nome d{a} {p} {s} é {answer}",
        ),
        (
            r"^como se chama (?:o |a )?(?P<p>meu|minha) (?P<s>.+?)$",
            "{p} {s} se chama {answer}",
        ),
        (rf"^qual {_E}? ?(?:o |a )?(?P<p>meu|minha) (?P<s>.+?)$", "{p} {s} é {answer}"),
        (r"^quais s(?:ã|a)o (?:os |as )?(?P<p>meus|minhas) (?P<s>.+?)$", "{p} {s} são {answer}"),
        (rf"^quando {_E} (?:o |a )?(?P<p>meu|minha) (?P<s>.+?)$", "{p} {s} é {answer}"),
        (r"^onde (?:eu )?moro$", "Moro em {answer}"),
        (r"^onde (?:eu )?trabalho$", "Trabalho em {answer}"),
        (
            r"^(?:do que|a que) (?:eu )?(?:tenho alergia|sou al(?:é|e)rgic[oa])$",
            "Tenho alergia a {answer}",
        ),
    )
)


def as_statement(question: str, answer: str) -> str:
    """The fact ``answer`` gives to ``question`` (both in the user's words)."""
    asked = tidy(question).rstrip("?").strip()
    said = strip_edges(answer).rstrip("?").strip()
    for pattern, template in _TEMPLATES:
        match = pattern.match(asked)
        if match:
            parts = dict(match.groupdict())
            if "p" in parts and not template.startswith("{p}"):
                parts["p"] = parts["p"].lower()
            elif "p" in parts:
                parts["p"] = parts["p"].capitalize()
            return _TWO_PREPOSITIONS.sub("", tidy(template.format(answer=said, **parts)))
    return f"{asked}? {said}"
