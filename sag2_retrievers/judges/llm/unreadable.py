"""One policy for answers an LLM judge cannot read, shared by every judge family.

An unreadable answer (prose, a thinking block, a continued prompt) is asked once more with a
stricter question. If that answer is unreadable too, the candidate is left unscored: it keeps
its previous score, or gets a BM25 prior below any confident "yes", and ``usage.degraded``
counts it. One odd answer in a long evaluation therefore costs one candidate, not the run.
Only answers that are unreadable systematically stop the judge, with the likely cause named
(a base model, a wrong chat template or thinking mode): three or more candidates unreadable
after the re-ask and outnumbering the readable answers, or, before any answer was readable,
five unreadable first answers once one re-ask has failed too.
"""

from __future__ import annotations

import threading
from collections.abc import Awaitable, Callable, Sequence

from ...errors import JudgeError
from ..base import Candidate, Usage
from .grading import UnreadableAnswer

# Unreadable answers needed before they count as systematic (and then only when they
# outnumber the readable ones): one or two odd answers never stop a run.
SYSTEMATIC_AFTER = 3
# Before any answer has been readable, this many unreadable first answers (with one still
# unreadable when asked again) stop the judge at once, rather than after every queued call.
SYSTEMATIC_FROM_THE_START = 5
# The highest BM25 prior: "undecided", below every answer that leans towards yes.
PRIOR_CEILING = 0.5
SAMPLES_KEPT = 3
_THINKING_MARKS = ("<think", "<thought", "thinking", "reasoning")
_TEMPLATE_MARKS = (
    "<|im_start|>",
    "<|im_end|>",
    "<|start_header_id|>",
    "<|eot_id|>",
    "<start_of_turn>",
    "<end_of_turn>",
    "[INST]",
    "[/INST]",
    "user\n",
    "assistant\n",
    "model\n",
)


def unscored(candidate: Candidate, candidates: Sequence[Candidate]) -> float:
    """The stand-in score of a candidate left unscored: its previous score when it has one,
    else its BM25 score against the question relative to the request's best, scaled to at
    most `PRIOR_CEILING` (0.0 without BM25 scores)."""
    if candidate.previous_score is not None:
        return candidate.previous_score
    best = max((c.question_bm25 or 0.0 for c in candidates), default=0.0)
    own = candidate.question_bm25 or 0.0
    if best <= 0.0 or own <= 0.0:
        return 0.0
    return PRIOR_CEILING * min(1.0, own / best)


def likely_cause(answers: Sequence[str]) -> str:
    """The most likely reason a model's answers are unreadable, from what it answered."""
    text = " ".join(answers)
    lowered = text.lower()
    if any(mark in lowered for mark in _THINKING_MARKS):
        return "thinking mode is on: disable it (e.g. enable_thinking=false or /no_think)"
    if any(mark in text for mark in _TEMPLATE_MARKS):
        return (
            "the chat template does not match the model: choose the model's own "
            "(--judge-template, or the server's chat format)"
        )
    return (
        "a base (not instruction-tuned) model, or a chat template that does not match the "
        "model: it continues the prompt instead of answering"
    )


class AnswerPolicy:
    """Applies the unreadable-answer policy for one judge and keeps its tallies (thread-safe)."""

    def __init__(self, usage: Usage, describe: Callable[[str], str]) -> None:
        self._usage = usage
        self._describe = describe
        self._readable = 0
        self._unreadable = 0
        self._unreadable_first = 0
        self._samples: list[str] = []
        self._lock = threading.Lock()

    async def settle(
        self,
        candidate: Candidate,
        candidates: Sequence[Candidate],
        first: float | UnreadableAnswer,
        again: Callable[[], Awaitable[float]],
    ) -> float:
        """The first answer's score, else the re-asked one's, else the unscored stand-in.

        Raises JudgeError when unreadable answers have become systematic.
        """
        if not isinstance(first, UnreadableAnswer):
            self._count_readable()
            return first
        self._count_unreadable_first(first.answer)
        try:
            score = await again()
        except UnreadableAnswer as error:
            self._count_unreadable(error.answer)
            self._usage.add(degraded=1)
            return unscored(candidate, candidates)
        self._count_readable()
        return score

    def _count_readable(self) -> None:
        """Tally one readable answer."""
        with self._lock:
            self._readable += 1

    def _count_unreadable_first(self, answer: str) -> None:
        """Tally one unreadable first answer; raise when no answer has been readable yet."""
        with self._lock:
            self._unreadable_first += 1
            self._keep(answer)
            systematic = (
                self._readable == 0
                and self._unreadable >= 1
                and self._unreadable_first >= SYSTEMATIC_FROM_THE_START
            )
        if systematic:
            self._fail()

    def _count_unreadable(self, answer: str) -> None:
        """Tally one candidate unreadable after its re-ask; raise when that is systematic."""
        with self._lock:
            self._unreadable += 1
            self._keep(answer)
            systematic = self._unreadable >= SYSTEMATIC_AFTER and self._unreadable > self._readable
        if systematic:
            self._fail()

    def _keep(self, answer: str) -> None:
        """Keep a few unreadable answers as examples (the caller holds the lock)."""
        if len(self._samples) < SAMPLES_KEPT:
            self._samples.append(answer)

    def _fail(self) -> None:
        """Raise the JudgeError for systematically unreadable answers, with the likely cause."""
        with self._lock:
            counts = (self._unreadable_first, self._unreadable, self._readable)
            samples = list(self._samples)
        raise JudgeError(
            self._describe(
                f"answers are systematically unreadable: {counts[0]} first answers and "
                f"{counts[1]} re-asked ones could not be read, {counts[2]} could (for example "
                f"{samples!r}); likely cause: {likely_cause(samples)}"
            )
        )


async def attempt(ask: Callable[[], Awaitable[float]]) -> float | UnreadableAnswer:
    """The score an ask returns, or its UnreadableAnswer as a value (other errors raise)."""
    try:
        return await ask()
    except UnreadableAnswer as error:
        return error
