"""Affordable LLM judges: warm-first rounds, cache hints, batched and grouped transports,
graded answers and cached-token accounting, all against mock transports."""

from __future__ import annotations

import asyncio
import hashlib
import json
import math
from typing import Any

import httpx
import pytest

from sag2_retrievers.errors import InvalidInputError, JudgeError
from sag2_retrievers.judges.base import Candidate, ContextPassage, JudgeRequest
from sag2_retrievers.judges.cache import CachedJudge, judgment_keys
from sag2_retrievers.judges.llm._http import RetryPolicy
from sag2_retrievers.judges.llm.chat import ChatAnswer, ChatMessages, ChatModelJudge
from sag2_retrievers.judges.llm.grading import answer_positions, graded_probability
from sag2_retrievers.judges.llm.openai_compat import OpenAICompatJudge
from sag2_retrievers.judges.llm.prompts import GRADED_QUESTION, YES_NO_QUESTION
from sag2_retrievers.judges.llm.tokens import read_token_counts
from sag2_retrievers.judges.llm.transports import CHATML, ChatTemplate, first_token_records

BASE_URL = "http://127.0.0.1:8000"
QUESTION = "Which river flows through the capital of France?"


def request_of(count: int, context: tuple[ContextPassage, ...] = ()) -> JudgeRequest:
    """A request with ``count`` distinct candidates."""
    candidates = tuple(Candidate(f"Title {i}", f"Passage number {i} text.") for i in range(count))
    return JudgeRequest(QUESTION, candidates, context)


def yes_logprob(prompt: str) -> float:
    """A deterministic log P(yes) in (-3, 0) derived from the prompt's last 200 characters."""
    digest = hashlib.sha256(prompt[-200:].encode()).digest()
    return -3.0 * (digest[0] + 1) / 257


def top_logprobs(prompt: str) -> dict[str, float]:
    """The first token's alternatives for a prompt: yes and no sharing the mass."""
    yes = yes_logprob(prompt)
    return {"Yes": yes, "No": math.log1p(-math.exp(yes))}


class FakeServer:
    """Chat and completions endpoints answering from the rendered prompt, recording requests."""

    def __init__(self, delay: float = 0.0, usage: dict[str, Any] | None = None) -> None:
        self.delay = delay
        self.usage = usage or {}
        self.bodies: list[dict[str, Any]] = []
        self.events: list[tuple[str, int]] = []

    async def __call__(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        number = len(self.bodies)
        self.bodies.append(body)
        self.events.append(("start", number))
        await asyncio.sleep(self.delay)
        self.events.append(("end", number))
        if request.url.path.endswith("/chat/completions"):
            return httpx.Response(200, json=self.chat_reply(body))
        return httpx.Response(200, json=self.completions_reply(body))

    def chat_reply(self, body: dict[str, Any]) -> dict[str, Any]:
        """One choice with the chat shape of log-probabilities."""
        top = top_logprobs(CHATML(body["messages"]))
        alternatives = [{"token": token, "logprob": lp} for token, lp in top.items()]
        record = {"token": "Yes", "logprob": top["Yes"], "top_logprobs": alternatives}
        choice = {"index": 0, "message": {"content": "Yes"}, "logprobs": {"content": [record]}}
        return {"choices": [choice], "usage": self.usage}

    def completions_reply(self, body: dict[str, Any]) -> dict[str, Any]:
        """One choice per prompt, listed in reverse to check they are matched by index."""
        choices = [
            {
                "index": index,
                "text": "Yes",
                "logprobs": {"tokens": ["Yes"], "top_logprobs": [top_logprobs(prompt)]},
            }
            for index, prompt in enumerate(body["prompt"])
        ]
        return {"choices": choices[::-1], "usage": self.usage}


def judge_for(server: Any, **options: Any) -> OpenAICompatJudge:
    """An OpenAI-compatible judge talking to a mock handler."""
    mock = httpx.MockTransport(server)
    transport = options.pop("transport", None)
    return OpenAICompatJudge(
        BASE_URL,
        "qwen2.5-7b-instruct",
        transport=transport or mock,
        http_transport=mock if transport else None,
        retry_policy=RetryPolicy(initial_wait=0.0),
        **options,
    )


def score(judge: Any, request: JudgeRequest) -> list[float]:
    """Score a request on a fresh event loop."""
    return list(asyncio.run(judge.score(request)))


# -- warm-first rounds -------------------------------------------------------------------------


def test_warm_first_completes_the_first_call_before_any_other_starts() -> None:
    """The round's shared block is cached by the first call before the rest are sent."""
    server = FakeServer(delay=0.01)
    score(judge_for(server), request_of(5))
    assert server.events[:2] == [("start", 0), ("end", 0)]
    assert len(server.events) == 10


def test_without_warm_first_calls_overlap() -> None:
    """The option is what orders the calls: off, the second starts before the first ends."""
    server = FakeServer(delay=0.01)
    score(judge_for(server, warm_first=False), request_of(5))
    assert server.events[:2] == [("start", 0), ("start", 1)]


def test_warm_first_does_not_change_the_scores() -> None:
    """Ordering is a cost measure only: the same prompts get the same scores."""
    request = request_of(6)
    assert score(judge_for(FakeServer()), request) == score(
        judge_for(FakeServer(), warm_first=False), request
    )


class SlowChatJudge(ChatModelJudge):
    """A chat-model judge whose model takes a moment and records when each call runs."""

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.events: list[str] = []

    @property
    def identity(self) -> str:
        return "slow"

    async def _ask(self, messages: ChatMessages) -> ChatAnswer:
        self.events.append("start")
        await asyncio.sleep(0.01)
        self.events.append("end")
        return ChatAnswer("yes", (("yes", math.log(0.7)), ("no", math.log(0.3))))


def test_chat_model_judges_warm_first_by_default() -> None:
    """The framework judges share the ordering: first call alone, then the rest."""
    judge = SlowChatJudge()
    score(judge, request_of(4))
    assert judge.events[:3] == ["start", "end", "start"]
    unordered = SlowChatJudge(warm_first=False)
    score(unordered, request_of(4))
    assert unordered.events[:2] == ["start", "start"]


# -- the shared block and cache hints ----------------------------------------------------------


def test_the_shared_block_is_byte_identical_and_first_within_a_round() -> None:
    """Every candidate's user message opens with the same question and context block."""
    server = FakeServer()
    context = (ContextPassage("Paris", "Paris is the capital of France.", 0.9),)
    score(judge_for(server), request_of(3, context))
    users = [body["messages"][1]["content"] for body in server.bodies]
    shared = users[0][: users[0].index("Candidate passage to judge:")]
    assert "Paris is the capital" in shared
    assert all(user.startswith(shared) for user in users)
    assert [user.count("Passage number") for user in users] == [1, 1, 1]


def test_prompt_cache_key_is_stable_within_a_round_and_differs_between_rounds() -> None:
    """One key per question and round; another round's context makes another key."""
    server = FakeServer()
    judge = judge_for(server)
    score(judge, request_of(3))
    score(judge, request_of(3, (ContextPassage("Paris", "Capital of France."),)))
    keys = [body["prompt_cache_key"] for body in server.bodies]
    assert len(set(keys[:3])) == 1 and len(set(keys[3:])) == 1
    assert keys[0] != keys[3]


def test_cache_hints_never_change_the_prompt_or_the_score() -> None:
    """With hints off the key is absent and everything else is identical."""
    hinted, plain = FakeServer(), FakeServer()
    request = request_of(3)
    assert score(judge_for(hinted), request) == score(judge_for(plain, cache_hints=False), request)
    assert all("prompt_cache_key" not in body for body in plain.bodies)
    for with_hint, without in zip(hinted.bodies, plain.bodies, strict=True):
        with_hint.pop("prompt_cache_key")
        assert with_hint == without


# -- the completions transport -----------------------------------------------------------------


def test_completions_transport_gives_the_chat_paths_scores() -> None:
    """The same conversation rendered with the template scores the same in batches."""
    request = request_of(7, (ContextPassage("Paris", "Capital of France.", 0.5),))
    chat = score(judge_for(FakeServer()), request)
    server = FakeServer()
    batched = score(judge_for(server, transport="completions"), request)
    assert batched == chat
    assert len(server.bodies) == 2  # the warm first prompt, then the other six
    assert server.bodies[1]["logprobs"] == 20 and server.bodies[1]["max_tokens"] == 1


def test_completions_requests_respect_the_batch_size() -> None:
    """Eight prompts with at most three per request: 1 warm + 3 + 3 + 1."""
    server = FakeServer()
    score(judge_for(server, transport="completions", max_batch_size=3), request_of(8))
    assert [len(body["prompt"]) for body in server.bodies] == [1, 3, 3, 1]


def test_completions_requests_respect_the_body_size() -> None:
    """Every request body stays within max_body_bytes, so more requests are sent."""
    server = FakeServer()
    limit = 3_000
    request = request_of(6)
    score(judge_for(server, transport="completions", max_body_bytes=limit), request)
    sizes = [len(json.dumps(body).encode()) for body in server.bodies]
    assert max(sizes) <= limit
    assert len(server.bodies) > 2
    assert sum(len(body["prompt"]) for body in server.bodies) == 6


def test_a_prompt_larger_than_the_body_limit_is_refused_before_sending() -> None:
    """No request could carry it; the error names the candidate and the limit."""
    server = FakeServer()
    judge = judge_for(server, transport="completions", max_body_bytes=600)
    with pytest.raises(JudgeError, match=r"candidate 0 .* over max_body_bytes=600"):
        score(judge, request_of(2))
    assert server.bodies == []


def test_the_template_renders_both_roles_and_opens_the_answer() -> None:
    """ChatML: system then user turn, ending at the assistant's turn."""
    rendered = CHATML([{"role": "system", "content": "S"}, {"role": "user", "content": "U"}])
    assert rendered == (
        "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nU<|im_end|>\n<|im_start|>assistant\n"
    )


def test_a_template_without_its_content_slot_is_refused() -> None:
    """A template that would drop the message is a configuration error."""
    with pytest.raises(InvalidInputError, match="user must hold"):
        ChatTemplate("broken", "{content}", "no slot", "")


def test_completions_choices_are_matched_by_index_and_must_all_be_there() -> None:
    """Missing or repeated indices are errors, not silently shifted scores."""
    choice = {"logprobs": {"tokens": ["No"], "top_logprobs": [{"No": -0.1}]}}
    records = first_token_records({"choices": [{"index": 1, **choice}, {"index": 0, **choice}]}, 2)
    assert [record["token"] for record in records] == ["No", "No"]
    with pytest.raises(JudgeError, match="answers 1 of 2"):
        first_token_records({"choices": [{"index": 0, **choice}]}, 2)
    with pytest.raises(JudgeError, match="twice"):
        first_token_records({"choices": [{"index": 0, **choice}, {"index": 0, **choice}]}, 2)


def test_transport_names_are_checked() -> None:
    """A misspelt transport and a grouped completions judge are refused up front."""
    with pytest.raises(InvalidInputError, match="'chat' or 'completions'"):
        OpenAICompatJudge(BASE_URL, "m", transport="batch")  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match="group_size needs the chat transport"):
        OpenAICompatJudge(BASE_URL, "m", transport="completions", group_size=4)


# -- graded answers ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "probability"),
    [("0", 0.0), ("1", 0.25), ("2", 0.5), ("3", 0.75), ("4", 1.0), ("**3**", 0.75), ("2/4", 0.5)],
)
def test_every_grade_maps_to_its_probability(text: str, probability: float) -> None:
    """Grade g reads as g / 4, whatever markdown surrounds the digit."""
    assert graded_probability(text) == probability


@pytest.mark.parametrize(
    "text", ["", "5", "34", "maybe", "yes", "I cannot help with that request.", "Grade: 3"]
)
def test_junk_and_refusals_are_not_grades(text: str) -> None:
    """Anything but one digit from 0 to 4 is a JudgeError quoting the answer."""
    with pytest.raises(JudgeError, match="not a grade from 0 to 4"):
        graded_probability(text)


def test_digit_log_probabilities_give_the_expected_grade() -> None:
    """When the grade's alternatives are known, the score is their expectation."""
    alternatives = [("4", math.log(0.5)), ("2", math.log(0.25)), ("x", math.log(0.25))]
    assert graded_probability("4", alternatives) == pytest.approx((1.0 * 0.5 + 0.5 * 0.25) / 0.75)


class NoLogprobsJudge(ChatModelJudge):
    """A model without log-probabilities: says yes to yes/no questions, grades 3 otherwise."""

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.sent: list[ChatMessages] = []

    @property
    def identity(self) -> str:
        return "no-logprobs"

    async def _ask(self, messages: ChatMessages) -> ChatAnswer:
        self.sent.append(messages)
        graded = messages[1]["content"].endswith(GRADED_QUESTION)
        return ChatAnswer("3" if graded else "Yes")


def test_a_model_without_logprobs_is_asked_for_grades_from_then_on() -> None:
    """The first bare answer is asked again graded; later candidates are asked graded only."""
    judge = NoLogprobsJudge()
    assert score(judge, request_of(4)) == [0.75] * 4
    endings = [m[1]["content"].rsplit("\n\n", 1)[1] for m in judge.sent]
    assert endings == [YES_NO_QUESTION] + [GRADED_QUESTION] * 4
    assert judge.usage.snapshot().http_calls == 5


def test_graded_false_keeps_the_coarse_yes_no_score() -> None:
    """Opting out gives the 1.0 / 0.0 reading and one call per candidate."""
    judge = NoLogprobsJudge(graded=False)
    assert score(judge, request_of(3)) == [1.0] * 3
    assert judge.usage.snapshot().http_calls == 3


def test_logprobs_keep_the_yes_no_question() -> None:
    """A model with log-probabilities is never asked for a grade."""
    judge = SlowChatJudge()
    assert score(judge, request_of(3)) == [pytest.approx(0.7)] * 3


# -- grouped judging ---------------------------------------------------------------------------


def tokens_of(text: str) -> list[str]:
    """A crude tokenisation keeping line breaks and words apart."""
    tokens: list[str] = []
    for line in text.split("\n"):
        tokens.extend([*line.replace(":", " : ").split(), "\n"])
    return tokens[:-1]


def test_grouped_lines_are_found_by_number() -> None:
    """Each number's yes/no token is located, whatever the line order."""
    tokens = tokens_of("2: no\n1: yes\n3: yes")
    positions = answer_positions(tokens, 3)
    assert {n: tokens[p] for n, p in positions.items()} == {1: "yes", 2: "no", 3: "yes"}


def test_missing_repeated_and_unanswered_lines_are_left_unread() -> None:
    """Line 2 missing, line 3 repeated, line 4 not yes or no, and prose ignored."""
    tokens = tokens_of("Here you go\n1: yes\n3: no\n3: yes\n4: maybe")
    assert set(answer_positions(tokens, 4) or {}) == {1}


@pytest.mark.parametrize(
    "reply", ["0: yes\n1: no\n2: yes\n3: no", "1: yes\n2: no\n3: yes\n4: no\n5: yes"]
)
def test_a_line_numbered_outside_the_group_makes_the_whole_reply_untrusted(reply: str) -> None:
    """A reply numbered from 0, or past the group, is shifted: none of its lines is read."""
    assert answer_positions(tokens_of(reply), 4) is None


class GroupedServer(FakeServer):
    """Answers grouped prompts with numbered lines, leaving out the numbers in ``skip``."""

    def __init__(self, skip: frozenset[int] = frozenset()) -> None:
        super().__init__()
        self.skip = skip

    def chat_reply(self, body: dict[str, Any]) -> dict[str, Any]:
        user = body["messages"][1]["content"]
        if "Candidate passages to judge:" not in user:
            return super().chat_reply(body)
        numbers = [int(line[1:].split("]")[0]) for line in user.splitlines() if line[:1] == "["]
        records: list[dict[str, Any]] = []
        for number in numbers:
            if number in self.skip:
                continue
            top = [{"token": " yes", "logprob": math.log(0.2)}, {"token": " no", "logprob": -0.5}]
            records += [{"token": f"{number}:", "logprob": 0.0, "top_logprobs": []}]
            records += [{"token": " no", "logprob": -0.5, "top_logprobs": top}]
            records += [{"token": "\n", "logprob": 0.0, "top_logprobs": []}]
        choice = {"index": 0, "message": {"content": ""}, "logprobs": {"content": records}}
        return {"choices": [choice], "usage": {}}


def test_grouped_judge_asks_k_candidates_per_call() -> None:
    """Seven candidates in groups of three: three calls, each line's P(yes) read."""
    server = GroupedServer()
    scores = score(judge_for(server, group_size=3), request_of(7))
    assert len(server.bodies) == 3
    assert scores == [pytest.approx(0.2 / (0.2 + math.exp(-0.5)))] * 7


def test_a_missing_grouped_line_is_asked_again_alone() -> None:
    """Candidate 2 of the group gets its own pointwise call and its pointwise score."""
    request = request_of(3)
    pointwise = score(judge_for(FakeServer()), request)
    server = GroupedServer(skip=frozenset({2}))
    scores = score(judge_for(server, group_size=3), request)
    assert len(server.bodies) == 2
    assert "Candidate passage to judge:" in server.bodies[1]["messages"][1]["content"]
    assert scores[1] == pointwise[1]
    assert scores[0] != pointwise[0]


def test_grouped_scores_are_never_replayed_as_pointwise_ones(tmp_path: Any) -> None:
    """The grouping is in the judge's identity and the keys cover the whole request."""
    request = request_of(3)
    grouped = judge_for(GroupedServer(), group_size=3)
    pointwise = judge_for(FakeServer())
    assert grouped.identity.endswith(";group=3")
    grouped_keys = judgment_keys(grouped.identity, request, grouped.scores_whole_request)
    assert set(grouped_keys).isdisjoint(judgment_keys(pointwise.identity, request))
    cache = tmp_path / "cache.sqlite"
    first = CachedJudge(grouped, cache)
    score(first, request)
    first.close()
    server = FakeServer()
    second = CachedJudge(judge_for(server), cache)
    score(second, request)
    second.close()
    assert len(server.bodies) == 3


# -- accounting --------------------------------------------------------------------------------


def test_cached_tokens_are_read_from_openai_replies() -> None:
    """prompt_tokens_details.cached_tokens lands in usage beside the prompt tokens."""
    usage = {
        "prompt_tokens": 100,
        "completion_tokens": 1,
        "prompt_tokens_details": {"cached_tokens": 96},
    }
    judge = judge_for(FakeServer(usage=usage))
    score(judge, request_of(2))
    snapshot = judge.usage.snapshot()
    assert (snapshot.input_tokens, snapshot.cached_input_tokens, snapshot.output_tokens) == (
        200,
        192,
        2,
    )


@pytest.mark.parametrize(
    ("usage", "expected"),
    [
        (
            {
                "prompt_tokens": 50,
                "completion_tokens": 1,
                "prompt_tokens_details": {"cached_tokens": 32},
            },
            (50, 32, 1),
        ),
        (
            {
                "input_tokens": 10,
                "cache_read_input_tokens": 900,
                "cache_creation_input_tokens": 0,
                "output_tokens": 1,
            },
            (910, 900, 1),
        ),
        (
            {"input_tokens": 10, "cache_creation_input_tokens": 500, "output_tokens": 1},
            (510, 0, 1),
        ),
        (
            {"input_tokens": 910, "output_tokens": 1, "input_token_details": {"cache_read": 900}},
            (910, 900, 1),
        ),
        ({"input_tokens": 7, "output_tokens": 1}, (7, 0, 1)),
        (None, (0, 0, 0)),
    ],
    ids=["openai", "anthropic-read", "anthropic-write", "langchain", "plain", "absent"],
)
def test_token_counts_from_every_reply_shape(
    usage: dict[str, Any] | None, expected: tuple[int, int, int]
) -> None:
    """Anthropic's input_tokens exclude cache traffic, so the prompt is their sum."""
    counts = read_token_counts(usage)
    assert (counts.input_tokens, counts.cached_input_tokens, counts.output_tokens) == expected


def test_estimates_follow_the_transport_and_grouping() -> None:
    """Pointwise: one call per candidate; completions: warm + batches; grouped: ceil(n/K)."""
    request = request_of(10)
    pointwise = judge_for(FakeServer()).estimate(request)
    batched = judge_for(FakeServer(), transport="completions", max_batch_size=4).estimate(request)
    grouped = judge_for(FakeServer(), group_size=4).estimate(request)
    assert (pointwise.http_calls, batched.http_calls, grouped.http_calls) == (10, 4, 3)
    assert batched.input_tokens == pointwise.input_tokens > grouped.input_tokens > 0
