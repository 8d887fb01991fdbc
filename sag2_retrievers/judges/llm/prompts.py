"""The judge's prompt text: one shared block per round, then what is specific to each call.

Every chat judge sends a system instruction and one user message. The user message opens
with the round's shared block (question, quoted context, note), byte-identical for every
candidate of a request so a server's prefix cache can serve it, and ends with the
candidate-specific part (the quoted candidate or a numbered group of them, then the
question asked about them). Context passages are labelled [C1]..[Cn] and grouped candidates
[1]..[n], so an answer line "2: yes" can only name a candidate.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

from ..base import Candidate, ContextPassage, JudgeRequest

YES_NO_QUESTION = "Answer yes or no."
GRADED_QUESTION = (
    "Grade the candidate with one digit: 0 = not evidence, 1 = same topic only, 2 = optional "
    "background, 3 = probably a link of the chain, 4 = a necessary fact of the chain. Answer "
    "with the digit only."
)
# Asked once more when the first answer could not be read.
STRICT_QUESTION = 'Reply with exactly one word, "yes" or "no", and nothing else.'
STRICT_GRADED_QUESTION = (
    "Reply with exactly one digit from 0 to 4 and nothing else: 0 = not evidence, 4 = a "
    "necessary fact of the chain."
)
GROUPED_QUESTION = (
    "Judge each numbered candidate on its own, as if it were the only one. Answer with one "
    "line per candidate, in order, each the candidate's number, a colon and yes or no (for "
    'example "1: yes").'
)
SECTION_BREAK = "\n\n"
# UTF-8 bytes per token: about four for English prose; estimates only, never limits.
BYTES_PER_TOKEN = 4
_LINE_BREAKING = re.compile("[\x7f-\x9f\u2028\u2029]")
# Chat-template control tokens (ChatML <|im_end|>, Llama 3 <|eot_id|>, Gemma <start_of_turn>,
# Mistral [INST], <s>, <bos> ...): a server that renders or tokenises the prompt reads them as
# turn boundaries, so a passage holding one could close the user turn and forge the answer.
_CONTROL_TOKEN = re.compile(
    r"<\|[^<>|\s]{1,40}\|>|</?(?:start_of_turn|end_of_turn|s|bos|eos|pad)>|\[/?(?:INST|SYS)\]"
    r"|<<SYS>>|<</SYS>>|\[/?(?:AVAILABLE_TOOLS|TOOL_CALLS|TOOL_RESULTS|SYSTEM_PROMPT)\]",
    re.IGNORECASE,
)

ChatMessages = list[dict[str, str]]


@dataclass(frozen=True)
class JudgePrompt:
    """One judge call's text: the instruction, the round's shared block, the call's own part.

    ``shared`` ends with the section break, so ``shared + specific`` is the user message.
    """

    instruction: str
    shared: str
    specific: str

    @property
    def user(self) -> str:
        """The whole user message."""
        return self.shared + self.specific

    def messages(self) -> ChatMessages:
        """The system + user conversation."""
        return [
            {"role": "system", "content": self.instruction},
            {"role": "user", "content": self.user},
        ]

    def folded_messages(self) -> ChatMessages:
        """One user message opening with the instruction, for chat formats that have no system
        turn and drop a system message (llama-cpp-python's ``gemma`` format does)."""
        return [{"role": "user", "content": self.instruction + SECTION_BREAK + self.user}]

    def cache_key(self) -> str:
        """A digest of the instruction and shared block: the same for a question's round."""
        digest = hashlib.sha256(f"{self.instruction}\0{self.shared}".encode())
        return "sag2-" + digest.hexdigest()[:32]

    def estimated_tokens(self) -> int:
        """A rough count of the prompt's tokens (UTF-8 bytes over four)."""
        size = len(self.instruction.encode()) + len(self.user.encode())
        return math.ceil(size / BYTES_PER_TOKEN)


def pointwise_prompt(
    request: JudgeRequest, candidate: Candidate, question: str = YES_NO_QUESTION
) -> JudgePrompt:
    """The prompt judging one candidate, ending with ``question``."""
    specific = SECTION_BREAK.join(
        [
            "Candidate passage to judge:\n"
            f"Title: {_quote(candidate.title)}\n"
            f"Text: {_quote(candidate.text)}",
            question,
        ]
    )
    return JudgePrompt(request.instruction, shared_block(request), specific)


def grouped_prompt(request: JudgeRequest, candidates: Sequence[Candidate]) -> JudgePrompt:
    """The prompt judging several candidates at once, numbered from 1, one answer line each."""
    lines = ["Candidate passages to judge:"]
    for number, candidate in enumerate(candidates, start=1):
        lines.append(f"[{number}] Title: {_quote(candidate.title)}")
        lines.append(f"Text: {_quote(candidate.text)}")
    specific = SECTION_BREAK.join(["\n".join(lines), GROUPED_QUESTION])
    return JudgePrompt(request.instruction, shared_block(request), specific)


def shared_block(request: JudgeRequest) -> str:
    """The question, quoted context and note, ending with a section break."""
    sections = [f"Question: {_quote(request.question)}"]
    if request.context:
        sections.append(_context_section(request.context))
    if request.note:
        sections.append(f"Note: {request.note}")
    return SECTION_BREAK.join(sections) + SECTION_BREAK


def build_messages(request: JudgeRequest, candidate: Candidate) -> ChatMessages:
    """The system instruction and a user message quoting question, context and candidate."""
    return pointwise_prompt(request, candidate).messages()


def build_user_message(request: JudgeRequest, candidate: Candidate) -> str:
    """Quote every piece of data as a JSON string so passages cannot break out of their place."""
    return pointwise_prompt(request, candidate).user


def _context_section(context: Sequence[ContextPassage]) -> str:
    """The shared context as quoted passages labelled C1..Cn (never a candidate's label),
    with previous scores when known."""
    lines = ["Shared context (quoted passages):"]
    for number, passage in enumerate(context, start=1):
        score = ""
        if passage.previous_score is not None:
            score = f" (previous score {passage.previous_score:.2f})"
        lines.append(f"[C{number}] Title: {_quote(passage.title)}{score}")
        lines.append(f"Text: {_quote(passage.text)}")
    return "\n".join(lines)


def _quote(text: str) -> str:
    """A JSON string literal: delimited, with quotes and every line break escaped.

    JSON escapes only C0 controls; U+0085, U+2028 and U+2029 (and the other C1 controls)
    also end a line for many readers, so they are escaped too and a passage stays one line.
    A chat-template control token keeps its meaning as JSON but loses its spelling: its first
    character is written as a JSON escape, so no tokenizer sees the token itself.
    """
    literal = _LINE_BREAKING.sub(_escape, json.dumps(text, ensure_ascii=False))
    return _CONTROL_TOKEN.sub(_neutralised, literal)


def _escape(match: re.Match[str]) -> str:
    """The JSON escape of one character."""
    return f"\\u{ord(match.group()):04x}"


def _neutralised(match: re.Match[str]) -> str:
    """A control token with its first character JSON-escaped."""
    token = match.group()
    return f"\\u{ord(token[0]):04x}{token[1:]}"


def candidate_groups(candidates: Sequence[Candidate], size: int) -> list[Sequence[Candidate]]:
    """Consecutive groups of at most ``size`` candidates, one `grouped_prompt` each."""
    return [candidates[start : start + size] for start in range(0, len(candidates), size)]
