"""A fake OpenAI-compatible model server on 127.0.0.1 for tests of ``--judge openai``: it
answers ``/v1/chat/completions`` (one candidate, or a numbered group) and ``/v1/completions``
(a list of prompts) with first-token log-probabilities of "yes" and "no", the probability of
yes taken from a score function the test gives; scripted failures and a server that refuses
prompt lists or log-probabilities show how the judge copes.

    with FakeOpenAIServer(lambda q: 0.9 if "Ostrel" in q.text else 0.1) as server:
        judge = server.judge()                       # OpenAICompatJudge on this server
        judge = server.judge(transport="completions")  # prompt lists in one request
"""

from __future__ import annotations

import json
import math
import re
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..judges.llm.openai_compat import OpenAICompatJudge
from ._loopback import LoopbackServer, Reply
from .jev import NoulQuestion, ScoreFunction, checked_score

FAKE_OPENAI_MODEL = "fake-judge"
CHAT_PATH = "/v1/chat/completions"
COMPLETIONS_PATH = "/v1/completions"
# The judge quotes every passage as a one-line JSON string after these labels (prompts.py).
_QUOTED = r'("(?:[^"\\]|\\.)*")'
_QUESTION = re.compile(r"Question: " + _QUOTED)
_CONTEXT_TITLE = re.compile(r"\[C\d+\] Title: " + _QUOTED)
_CANDIDATE = re.compile(r"(?:\[\d+\] )?Title: " + _QUOTED + r"\nText: " + _QUOTED)
_CANDIDATES_START = re.compile(r"Candidate passages? to judge:\n")
# Log-probabilities are finite: a certain answer is sent as this close to 1.
_EDGE = 1e-6


@dataclass(frozen=True)
class OpenAIFailure:
    """A scripted failure for the next request: an HTTP ``status`` (with a ``retry_after``
    header when given), or ``drop`` to close the connection without a reply."""

    status: int = 503
    retry_after: str | None = None
    drop: bool = False


def asked_candidates(prompt: str) -> list[NoulQuestion]:
    """What a judge prompt asks about each of its candidates (one, or a numbered group)."""
    question = _QUESTION.search(prompt)
    start = _CANDIDATES_START.search(prompt)
    if question is None or start is None:
        return []
    head, tail = prompt[: start.start()], prompt[start.end() :]
    context = tuple(json.loads(title) for title in _CONTEXT_TITLE.findall(head))
    asked = json.loads(question.group(1))
    return [
        NoulQuestion(asked, json.loads(title), json.loads(text), context)
        for title, text in _CANDIDATE.findall(tail)
    ]


def _logprob_pair(p_yes: float) -> list[dict[str, Any]]:
    """The top log-probabilities of a first token: "Yes" and "No"."""
    p_yes = min(1 - _EDGE, max(_EDGE, float(p_yes)))
    return [
        {"token": "Yes", "logprob": math.log(p_yes)},
        {"token": "No", "logprob": math.log(1 - p_yes)},
    ]


def chat_reply(body: dict[str, Any], score: ScoreFunction, logprobs: bool) -> dict[str, Any]:
    """A chat completion: "Yes"/"No" for one candidate, "N: yes" lines for a group, each
    answer token carrying its top log-probabilities when they were asked for."""
    prompt = str(body["messages"][-1]["content"])
    candidates = asked_candidates(prompt)
    records: list[dict[str, Any]] = []
    for number, candidate in enumerate(candidates, start=1):
        top = _logprob_pair(checked_score(score(candidate)))
        answer = top[0] if top[0]["logprob"] >= top[1]["logprob"] else top[1]
        if len(candidates) > 1:
            records += [{"token": f"{number}:", "logprob": 0.0, "top_logprobs": []}]
            answer = {**answer, "token": " " + answer["token"].lower()}
        records.append({**answer, "top_logprobs": top})
        if len(candidates) > 1:
            records.append({"token": "\n", "logprob": 0.0, "top_logprobs": []})
    content = "".join(record["token"] for record in records)
    choice = {
        "index": 0,
        "finish_reason": "stop",
        "message": {"role": "assistant", "content": content},
        "logprobs": {"content": records} if logprobs and body.get("logprobs") else None,
    }
    return {"model": body.get("model"), "choices": [choice], "usage": _usage(body, len(records))}


def completions_reply(body: dict[str, Any], score: ScoreFunction, logprobs: bool) -> dict[str, Any]:
    """A completions reply: one choice per prompt, its first token's alternatives as a
    token -> logprob object (vLLM's shape)."""
    prompts = body["prompt"] if isinstance(body["prompt"], list) else [body["prompt"]]
    choices = []
    for index, prompt in enumerate(prompts):
        asked = asked_candidates(str(prompt))
        top = _logprob_pair(checked_score(score(asked[0])) if asked else 0.5)
        token = " Yes" if top[0]["logprob"] >= top[1]["logprob"] else " No"
        alternatives = {" " + entry["token"]: entry["logprob"] for entry in top}
        choices.append(
            {
                "index": index,
                "text": token,
                "finish_reason": "length",
                "logprobs": {"tokens": [token], "top_logprobs": [alternatives]}
                if logprobs
                else None,
            }
        )
    return {"model": body.get("model"), "choices": choices, "usage": _usage(body, len(choices))}


def _usage(body: dict[str, Any], output_tokens: int) -> dict[str, int]:
    """Token counts a server would report: about four characters of request per token."""
    prompt_tokens = len(json.dumps(body)) // 4
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": output_tokens,
        "total_tokens": prompt_tokens + output_tokens,
    }


class FakeOpenAIServer(LoopbackServer):
    """An OpenAI-compatible server on 127.0.0.1 (a free port) answering with ``score``; use
    it as a context manager, which stops it on exit.

    ``failures`` are answered, in order, to the first requests instead of a reply;
    ``takes_lists=False`` refuses a completions request with more than one prompt (HTTP 400,
    as servers that take one prompt do); ``logprobs=False`` leaves log-probabilities out.
    ``requests`` records each request's path and JSON body, in arrival order."""

    def __init__(
        self,
        score: ScoreFunction,
        *,
        failures: Sequence[OpenAIFailure] = (),
        takes_lists: bool = True,
        logprobs: bool = True,
    ) -> None:
        self.requests: list[tuple[str, dict[str, Any]]] = []
        self._score = score
        self._failures = list(failures)
        self._takes_lists = takes_lists
        self._logprobs = logprobs
        self._lock = threading.Lock()
        super().__init__()

    @property
    def url(self) -> str:
        """The base URL to give a judge (``OpenAICompatJudge``, ``sag2 --base-url``)."""
        return f"{self.origin}/v1"

    def judge(self, **options: Any) -> OpenAICompatJudge:
        """An `OpenAICompatJudge` pointed at this server."""
        return OpenAICompatJudge(self.url, FAKE_OPENAI_MODEL, **options)

    def answer(self, path: str, body: dict[str, Any]) -> Reply:
        """The reply to one request: a scripted failure first, else the route's answer."""
        with self._lock:
            self.requests.append((path, body))
            failure = self._failures.pop(0) if self._failures else None
        if failure is not None:
            headers = {"Retry-After": failure.retry_after} if failure.retry_after else {}
            scripted = None if failure.drop else {"error": {"message": "scripted failure"}}
            return Reply(failure.status, scripted, headers)
        if path == CHAT_PATH:
            return Reply(200, chat_reply(body, self._score, self._logprobs))
        if path != COMPLETIONS_PATH:
            return Reply(404, {"error": {"message": f"no route {path}"}})
        prompts = body.get("prompt")
        if not self._takes_lists and isinstance(prompts, list) and len(prompts) > 1:
            return Reply(400, {"error": {"message": "prompt must be a string"}})
        return Reply(200, completions_reply(body, self._score, self._logprobs))
