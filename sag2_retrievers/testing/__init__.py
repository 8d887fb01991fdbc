"""Fakes of the judges' servers for users' own tests, with no key and no network: JEV (`jev`)
and an OpenAI-compatible server (`openai_server`), each answering every candidate with a
score from a function the test gives, so the real judge code path runs.

    from sag2_retrievers.testing import FakeOpenAIServer, fake_jev_judge
    judge = fake_jev_judge(lambda q: 0.9 if "Ostrel" in q.text else 0.1)
    with FakeOpenAIServer(lambda q: 0.9 if "Ostrel" in q.text else 0.1) as server:
        judge = server.judge()  # an OpenAICompatJudge; or sag2 query --judge openai --base-url
"""

from .jev import (
    FAKE_BASE_URL,
    FAKE_KEY,
    FAKE_MODEL,
    FakeJEVServer,
    FakeJEVTransport,
    NoulQuestion,
    ScoreFunction,
    fake_jev_judge,
    noul_reply,
)
from .openai_server import FakeOpenAIServer, OpenAIFailure, asked_candidates

__all__ = [
    "FAKE_BASE_URL",
    "FAKE_KEY",
    "FAKE_MODEL",
    "FakeJEVServer",
    "FakeJEVTransport",
    "FakeOpenAIServer",
    "NoulQuestion",
    "OpenAIFailure",
    "ScoreFunction",
    "asked_candidates",
    "fake_jev_judge",
    "noul_reply",
]
