"""A fake JEV for users' own tests: it speaks JEV's Noul interface (the real `JEVJudge` code
path runs) and answers each candidate with a score from a function the test gives, with no
key and no network: an httpx transport, or a tiny server on 127.0.0.1 for code that takes
only a URL.

    from sag2_retrievers.testing import fake_jev_judge
    judge = fake_jev_judge(lambda q: 0.9 if "Ostrel" in q.text else 0.1)
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx

from ..judges.llm.jev import ENDPOINT_PATH, JEVJudge
from ._loopback import LoopbackServer, Reply

FAKE_KEY = "fake-jev-key"
FAKE_MODEL = "typesafe/jev-fake"
FAKE_BASE_URL = "http://fake-jev.test"


@dataclass(frozen=True)
class NoulQuestion:
    """What the judge asked about one candidate: the question, the candidate's title and text,
    and the titles of the passages given as context."""

    question: str
    title: str
    text: str
    context_titles: tuple[str, ...]


ScoreFunction = Callable[[NoulQuestion], float]


def noul_reply(body: dict[str, Any], score: ScoreFunction) -> dict[str, Any]:
    """JEV's reply to one request body: a Noul answer per question, scored by ``score``."""
    state = body.get("state", {})
    context = tuple(str(passage.get("title", "")) for passage in state.get("context", ()))
    answers = {}
    for question_id, question in body["questions"].items():
        candidate = question["instructions"]["candidate"]
        asked = NoulQuestion(
            state.get("question", ""), candidate["title"], candidate["text"], context
        )
        answers[question_id] = {"type": "noul", "noul": checked_score(score(asked))}
    usage = {"input_tokens": len(json.dumps(body)) // 4, "output_tokens": len(answers)}
    return {"model": FAKE_MODEL, "answers": answers, "usage": usage}


def checked_score(value: float) -> float:
    """A score function's value, refused unless it is a probability (the real JEV's range)."""
    if not 0.0 <= float(value) <= 1.0:
        raise ValueError(f"the score function returned {value!r}; return a number in [0, 1]")
    return float(value)


class FakeJEVTransport(httpx.MockTransport):
    """An httpx transport answering JEV requests with ``score``; counts the requests it got."""

    def __init__(self, score: ScoreFunction) -> None:
        self.requests = 0
        self._score = score
        super().__init__(self._answer)

    def _answer(self, request: httpx.Request) -> httpx.Response:
        """One JEV reply (404 for any path but JEV's)."""
        if request.url.path != ENDPOINT_PATH:
            return httpx.Response(404, json={"error": f"no route {request.url.path}"})
        self.requests += 1
        return httpx.Response(200, json=noul_reply(json.loads(request.content), self._score))


def fake_jev_judge(score: ScoreFunction, **options: Any) -> JEVJudge:
    """A real `JEVJudge` whose HTTP calls go to a `FakeJEVTransport` answering with ``score``."""
    options.setdefault("base_url", FAKE_BASE_URL)
    return JEVJudge(FAKE_KEY, transport=FakeJEVTransport(score), **options)


class FakeJEVServer(LoopbackServer):
    """JEV's endpoint on 127.0.0.1 (a free port), answering with ``score``, for code that
    takes a base URL; use it as a context manager, which stops the server on exit."""

    def __init__(self, score: ScoreFunction) -> None:
        self.requests = 0
        self._score = score
        self._lock = threading.Lock()
        super().__init__()

    def answer(self, path: str, body: dict[str, Any]) -> Reply:
        """A Noul reply on JEV's path (counted), 404 on any other."""
        if path != ENDPOINT_PATH:
            return Reply(404, {"error": f"no route {path}"})
        with self._lock:
            self.requests += 1
        return Reply(200, noul_reply(body, self._score))

    @property
    def url(self) -> str:
        """The base URL to give a judge (``JEVJudge(base_url=...)``, ``sag2 --base-url``)."""
        return self.origin

    def judge(self, **options: Any) -> JEVJudge:
        """A `JEVJudge` pointed at this server."""
        return JEVJudge(FAKE_KEY, base_url=self.url, **options)
