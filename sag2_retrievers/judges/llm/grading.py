"""Reading answers other than one yes/no token: a 0-4 grade, and numbered yes/no lines."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

from ...errors import JudgeError

# Grade g of 0 (not evidence) .. 4 (a necessary fact) read as probability g / 4.
GRADE_PROBABILITIES = {"0": 0.0, "1": 0.25, "2": 0.5, "3": 0.75, "4": 1.0}
ANSWER_PREVIEW = 80
# A reply longer than this is prose, not a one-word or one-digit answer; never parsed further.
LONGEST_SHORT_ANSWER = 64
# Only quotes, emphasis, brackets and a final full stop may surround a grade: "-1" is no grade.
_GRADE = re.compile(r"[\s\"'*`(\[]*([0-4])(?:\s*/\s*4)?[\s\"'*`)\].]*")
_LINE_LABEL = re.compile(r"\s*\[?(\d{1,4})\]?\s*[:.)-]?\s*")
# A line already longer than this cannot be a label such as "[12]: ", however it continues.
LONGEST_LABEL = 16
ANSWER_WORDS = frozenset({"yes", "no"})


class UnreadableAnswer(JudgeError):
    """A reply that is not the answer asked for (``answer`` holds its start): the judge asks
    once more, then leaves the candidate unscored rather than failing the retrieval."""

    def __init__(self, message: str, answer: str) -> None:
        super().__init__(message)
        self.answer = answer


def graded_probability(text: str, alternatives: Sequence[tuple[str, float]] | None = None) -> float:
    """A 0-4 grade as a probability. The reply must itself be a grade; then the expected grade
    over the first token's digit alternatives, when there are any, refines it (a digit the
    model did not answer never turns prose into a score)."""
    match = _GRADE.fullmatch(text) if len(text) <= LONGEST_SHORT_ANSWER else None
    if match is None:
        raise unreadable_answer(text, "a grade from 0 to 4")
    digits = [
        (GRADE_PROBABILITIES[token.strip()], math.exp(logprob))
        for token, logprob in alternatives or ()
        if token.strip() in GRADE_PROBABILITIES
    ]
    total = sum(weight for _, weight in digits)
    if total > 0.0:
        return sum(value * weight for value, weight in digits) / total
    return GRADE_PROBABILITIES[match.group(1)]


def unreadable_answer(text: str, expected: str, advice: str = "") -> UnreadableAnswer:
    """The error for a reply that is not what was asked for, quoting its start."""
    preview = text if len(text) <= ANSWER_PREVIEW else text[:ANSWER_PREVIEW] + "..."
    return UnreadableAnswer(
        f"the model answered {preview!r}, not {expected}; use an instruction-following model "
        f"with thinking disabled{advice}",
        preview,
    )


def answer_positions(tokens: Sequence[str], count: int) -> dict[int, int] | None:
    """For candidates 1..count, the position of the yes/no token of the line "N: yes";
    None when a line is labelled outside 1..count, so the reply cannot be trusted at all.

    A reply numbered from 0 (or past the group) is shifted, and reading its in-range lines
    would score the wrong candidates. A number answered on two lines is left out, as is a
    line whose answer is not yes or no, so the caller asks about those candidates again.
    Each token is looked at once and a line is kept only while it can still be a label, so
    a long one-line reply takes linear time.
    """
    found: dict[int, int] = {}
    repeated: set[int] = set()
    line = ""
    for position, token in enumerate(tokens):
        if token.strip().lower() in ANSWER_WORDS:
            label = _LINE_LABEL.fullmatch(line)
            number = int(label.group(1)) if label is not None else None
            if number is not None and not 1 <= number <= count:
                return None
            if number in found:
                repeated.add(number)
            elif number is not None:
                found[number] = position
        if "\n" in token:
            line = token.rsplit("\n", 1)[-1][: LONGEST_LABEL + 1]
        elif len(line) <= LONGEST_LABEL:
            line += token[: LONGEST_LABEL + 1]
    return {number: at for number, at in found.items() if number not in repeated}
