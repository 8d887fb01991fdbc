"""Reading answers other than one yes/no token: a 0-4 grade, and numbered yes/no lines."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

from ..errors import JudgeError

# Grade g of 0 (not evidence) .. 4 (a necessary fact) read as probability g / 4.
GRADE_PROBABILITIES = {"0": 0.0, "1": 0.25, "2": 0.5, "3": 0.75, "4": 1.0}
ANSWER_PREVIEW = 80
_GRADE = re.compile(r"^[\W_]*([0-4])(?:\s*/\s*4)?[\W_]*$")
_LINE_LABEL = re.compile(r"\s*\[?(\d{1,4})\]?\s*[:.)-]?\s*")
ANSWER_WORDS = frozenset({"yes", "no"})


def graded_probability(text: str, alternatives: Sequence[tuple[str, float]] | None = None) -> float:
    """A 0-4 grade as a probability: the expected grade over the first token's digit
    alternatives when there are any, else the grade the reply states (a JudgeError otherwise)."""
    digits = [
        (GRADE_PROBABILITIES[token.strip()], math.exp(logprob))
        for token, logprob in alternatives or ()
        if token.strip() in GRADE_PROBABILITIES
    ]
    total = sum(weight for _, weight in digits)
    if total > 0.0:
        return sum(value * weight for value, weight in digits) / total
    match = _GRADE.match(text.strip())
    if match is None:
        raise unreadable_answer(text, "a grade from 0 to 4")
    return GRADE_PROBABILITIES[match.group(1)]


def unreadable_answer(text: str, expected: str, advice: str = "") -> JudgeError:
    """The error for a reply that is not what was asked for, quoting its start."""
    preview = text if len(text) <= ANSWER_PREVIEW else text[:ANSWER_PREVIEW] + "..."
    return JudgeError(
        f"the model answered {preview!r}, not {expected}; use an instruction-following model "
        f"with thinking disabled{advice}"
    )


def answer_positions(tokens: Sequence[str], count: int) -> dict[int, int]:
    """For candidates 1..count, the position of the yes/no token of the line "N: yes".

    Lines for other numbers are ignored; a number answered on two lines is left out, as is
    a line whose answer is not yes or no, so the caller asks about those candidates again.
    """
    found: dict[int, int] = {}
    repeated: set[int] = set()
    line = ""
    for position, token in enumerate(tokens):
        label = _LINE_LABEL.fullmatch(line)
        if token.strip().lower() in ANSWER_WORDS and label is not None:
            number = int(label.group(1))
            if number in found:
                repeated.add(number)
            elif 1 <= number <= count:
                found[number] = position
        line = (line + token).rsplit("\n", 1)[-1]
    return {number: at for number, at in found.items() if number not in repeated}
