"""Reading an OpenAI-compatible reply: P(yes) from its token log-probabilities, its usage.

The score is the probability of "yes" normalised against "no" over the first answer token's
top log-probabilities; a reply without them, or with an impossible entry, is a JudgeError
naming what was missing, and an answer that is neither word an `UnreadableAnswer`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from ...errors import JudgeError
from ..base import Usage
from ._http import finite_number
from .grading import UnreadableAnswer
from .tokens import read_token_counts

TOP_LOGPROBS = 20
LOGPROBS_HELP = (
    "the judge needs token log-probabilities: use vLLM (top_logprobs up to --max-logprobs, "
    "default 20), a llama.cpp llama-server build from 2025 or later, or Ollama 0.12.11 or later"
)


def record_or_unreadable(record: Mapping[str, Any]) -> float | UnreadableAnswer:
    """`record_yes_probability`, with an unreadable answer returned rather than raised."""
    try:
        return record_yes_probability(record)
    except UnreadableAnswer as unreadable:
        return unreadable


def line_probability(record: Mapping[str, Any]) -> float | None:
    """P(yes) of a grouped answer's yes/no token, or None when its record is unusable."""
    try:
        return record_yes_probability(record)
    except JudgeError:
        return None


def yes_probability(reply: Any) -> float:
    """P(yes) normalised against P(no) over the first token's top log-probabilities.

    Tokens count as yes or no when their stripped, lowercased text is exactly that word. When
    neither appears, the sampled token decides (yes 1.0, no 0.0).
    """
    return record_yes_probability(token_records(reply)[0])


def record_yes_probability(first: Mapping[str, Any]) -> float:
    """`yes_probability` of one token record (``token`` and its ``top_logprobs``)."""
    alternatives = _alternatives(first)
    log_yes = _log_total(alternatives, "yes")
    log_no = _log_total(alternatives, "no")
    if log_yes is None and log_no is None:
        return _sampled_answer(first)
    if log_no is None:
        return 1.0
    if log_yes is None:
        return 0.0
    return _sigmoid(log_yes - log_no)


def token_records(reply: Any) -> list[Mapping[str, Any]]:
    """The log-probability records of the reply's generated tokens (at least one)."""
    choices = reply.get("choices") if isinstance(reply, Mapping) else None
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], Mapping):
        raise JudgeError("the reply has no choices; the server may not be OpenAI-compatible")
    logprobs = choices[0].get("logprobs")
    content = logprobs.get("content") if isinstance(logprobs, Mapping) else None
    if not isinstance(content, list) or not content or not isinstance(content[0], Mapping):
        raise JudgeError(f"the reply carries no log-probabilities; {LOGPROBS_HELP}")
    return [record if isinstance(record, Mapping) else {} for record in content]


def _alternatives(first: Mapping[str, Any]) -> list[tuple[str, float]]:
    """The (token, logprob) pairs of a token record's top log-probabilities, all checked.

    An entry that is not a token with a finite log-probability <= 0 is refused rather than
    skipped: skipping it could leave the sampled token to decide with a score of 0 or 1.
    """
    entries = first.get("top_logprobs") or []
    if not isinstance(entries, list):
        raise JudgeError(f"the reply's top log-probabilities are not a list: {entries!r:.80}")
    pairs = []
    for entry in entries:
        token = entry.get("token") if isinstance(entry, Mapping) else None
        logprob = finite_number(entry.get("logprob")) if isinstance(entry, Mapping) else None
        if not isinstance(token, str) or logprob is None or logprob > 0.0:
            raise JudgeError(
                f"the reply holds an impossible log-probability entry {entry!r:.80}; "
                "expected a token with a finite log-probability <= 0"
            )
        pairs.append((token, logprob))
    return pairs


def _log_total(alternatives: Sequence[tuple[str, float]], word: str) -> float | None:
    """log of the summed probability of the tokens spelling `word`, or None if none does."""
    logprobs = [lp for token, lp in alternatives if token.strip().lower() == word]
    if not logprobs:
        return None
    peak = max(logprobs)
    return peak + math.log(sum(math.exp(lp - peak) for lp in logprobs))


def _sigmoid(x: float) -> float:
    """1 / (1 + e^-x) without overflow for large |x|."""
    if x >= 0:
        return 1.0 / (1.0 + math.exp(-x))
    shrink = math.exp(x)
    return shrink / (1.0 + shrink)


def _sampled_answer(first: Mapping[str, Any]) -> float:
    """1.0 or 0.0 from the sampled token when it is yes or no; otherwise a JudgeError."""
    token = first.get("token")
    answer = token.strip().lower() if isinstance(token, str) else None
    if answer == "yes":
        return 1.0
    if answer == "no":
        return 0.0
    shown = str(token)[:80]
    raise UnreadableAnswer(
        f"the model answered {shown!r} and neither yes nor no is among its top "
        f"{TOP_LOGPROBS} tokens; use an instruction-following model and disable thinking",
        shown,
    )


def add_reply_usage(usage: Usage, reply: Any) -> None:
    """Add the tokens a reply reports (cached ones too) and its cost, when a gateway reports
    one, to ``usage``."""
    record = reply.get("usage") if isinstance(reply, Mapping) else None
    if not isinstance(record, Mapping):
        return
    counts = read_token_counts(record)
    usage.add(
        input_tokens=counts.input_tokens,
        cached_input_tokens=counts.cached_input_tokens,
        cache_reports=int(counts.cache_reported),
        output_tokens=counts.output_tokens,
        cost_usd=finite_number(record.get("cost")) or 0.0,
    )
