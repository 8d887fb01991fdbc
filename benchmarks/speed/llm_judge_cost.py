"""What an LLM judge costs per question, per transport and mode, against a recording server.

Run from the repository root: ``python benchmarks/speed/llm_judge_cost.py [--questions N]``. The
benchmark starts an OpenAI-compatible server on 127.0.0.1 (chat and completions endpoints)
that renders chat conversations with ChatML, answers with deterministic log-probabilities
derived from each candidate's text (its word overlap with the question, plus a hash), and
simulates a prefix cache: a prompt's longest token prefix already seen in a *completed*
earlier request is reported as ``cached_tokens``. Tokens are words and punctuation marks
with their leading spaces; each request takes ``--latency`` seconds (default 5 ms) before
its reply, so concurrent requests overlap as they do on a real server. SAG2 then runs on
the first N KAG MuSiQue questions (pooled corpus) with each judge configuration, and the
table gives HTTP calls, input, cached and output tokens per question, as the server counted
them and as the judge's own usage report says, the share of input tokens that are a
round's shared block (the most any prefix cache can serve), and whether the final rankings
equal those of the pointwise chat path as it was before warm-first rounds and cache keys.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import re
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import _here  # noqa: F401 - puts benchmarks/ on the import path
import httpx
from _common import KAG_QUESTIONS, git_revision, machine

from sag2_retrievers import Document, SAG2Engine, SQLiteIndex
from sag2_retrievers.eval import load_questions, pool_corpus
from sag2_retrievers.eval.datasets import unique_passages
from sag2_retrievers.judges.base import Judge
from sag2_retrievers.judges.llm.chat import ChatAnswer, ChatMessages, ChatModelJudge
from sag2_retrievers.judges.llm.openai_compat import OpenAICompatJudge
from sag2_retrievers.judges.llm.prompts import GRADED_QUESTION
from sag2_retrievers.judges.llm.tokens import read_token_counts
from sag2_retrievers.judges.llm.transports import CHATML

TOKEN = re.compile(r"\s*(?:\w+|[^\w\s])|\s+")
WORD = re.compile(r"\w{4,}")
CANDIDATE = re.compile(r'Title: ("(?:[^"\\]|\\.)*")\nText: ("(?:[^"\\]|\\.)*")')
QUESTION = re.compile(r'^Question: ("(?:[^"\\]|\\.)*")', re.MULTILINE)
GROUP_MARK = "Candidate passages to judge:"
DEPTH = 10


@dataclass
class Ledger:
    """What the server saw: requests, prompts, prompt tokens, cached tokens, output tokens."""

    requests: int = 0
    prompts: int = 0
    input_tokens: int = 0
    cached_tokens: int = 0
    output_tokens: int = 0
    shared_tokens: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)


class PrefixCache:
    """Token-prefix hashes of completed prompts; a new prompt is credited its longest match."""

    def __init__(self) -> None:
        self._seen: set[int] = set()
        self._lock = threading.Lock()

    @staticmethod
    def _hashes(tokens: list[str]) -> list[int]:
        """The hash of every prefix of the token list."""
        hashes, current = [], 0
        for token in tokens:
            current = hash((current, token))
            hashes.append(current)
        return hashes

    def lookup(self, tokens: list[str]) -> tuple[int, list[int]]:
        """How many leading tokens are cached, and the prefix hashes for `complete`."""
        hashes = self._hashes(tokens)
        with self._lock:
            cached = 0
            for value in hashes:
                if value not in self._seen:
                    break
                cached += 1
        return cached, hashes

    def complete(self, hashes: list[int], cached: int) -> None:
        """Record a finished prompt (only the prefixes not already recorded)."""
        with self._lock:
            self._seen.update(hashes[cached:])


def tokens_of(text: str) -> list[str]:
    """The simulated tokenisation: words and punctuation with their leading whitespace."""
    return TOKEN.findall(text)


def yes_probability(question: str, title: str, text: str) -> float:
    """The simulated model's P(yes): the candidate's overlap with the question, plus a hash."""
    asked = set(WORD.findall(question.lower()))
    said = set(WORD.findall(f"{title} {text}".lower()))
    overlap = len(asked & said) / max(1, len(asked))
    jitter = hashlib.sha256(f"{title}\0{text}".encode()).digest()[0] / 255
    return min(0.98, 0.02 + 0.8 * overlap + 0.15 * jitter)


def judged(prompt: str) -> tuple[str, list[tuple[str, str]], bool]:
    """The prompt's question, the candidates after its shared block, and whether grouped."""
    match = QUESTION.search(prompt)
    question = json.loads(match.group(1)) if match else ""
    grouped = GROUP_MARK in prompt
    tail = prompt.split(GROUP_MARK if grouped else "Candidate passage to judge:")[-1]
    found = [(json.loads(t), json.loads(x)) for t, x in CANDIDATE.findall(tail)]
    return question, found, grouped


def answer_alternatives(probability: float, space: str = "") -> dict[str, float]:
    """The first token's top log-probabilities for a P(yes)."""
    return {f"{space}Yes": math.log(probability), f"{space}No": math.log1p(-probability)}


class RecordingServer(ThreadingHTTPServer):
    """The recording OpenAI-compatible server, with its ledger and prefix cache."""

    daemon_threads = True

    def __init__(self, latency: float) -> None:
        super().__init__(("127.0.0.1", 0), RecordingHandler)
        self.latency = latency
        self.ledger = Ledger()
        self.cache = PrefixCache()

    def reset(self) -> None:
        """Forget the counts and the cache, before another configuration runs."""
        self.ledger = Ledger()
        self.cache = PrefixCache()

    def account(
        self, prompts: list[str], output_tokens: int
    ) -> tuple[int, int, Callable[[], None]]:
        """Prompt and cached tokens of a request, and the call that marks it completed."""
        entries = [self.cache.lookup(tokens_of(prompt)) for prompt in prompts]
        total = sum(len(hashes) for _, hashes in entries)
        cached = sum(hit for hit, _ in entries)
        shared = sum(len(tokens_of(_shared_part(prompt))) for prompt in prompts)
        with self.ledger.lock:
            self.ledger.shared_tokens += shared
            self.ledger.requests += 1
            self.ledger.prompts += len(prompts)
            self.ledger.input_tokens += total
            self.ledger.cached_tokens += cached
            self.ledger.output_tokens += output_tokens

        def complete() -> None:
            for hit, hashes in entries:
                self.cache.complete(hashes, hit)

        return total, cached, complete


class RecordingHandler(BaseHTTPRequestHandler):
    """Serves /v1/chat/completions and /v1/completions."""

    server: RecordingServer

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: the ledger is the record."""

    def do_POST(self) -> None:
        """Answer one request and count it."""
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        if self.path.endswith("/chat/completions"):
            reply, complete = self._chat(body)
        else:
            reply, complete = self._completions(body)
        data = json.dumps(reply).encode()
        time.sleep(self.server.latency)
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
        complete()

    def _chat(self, body: dict[str, Any]) -> tuple[dict[str, Any], Callable[[], None]]:
        """A chat reply: pointwise or grouped, with or without log-probabilities."""
        prompt = CHATML(body["messages"])
        question, candidates, grouped = judged(prompt)
        with_logprobs = bool(body.get("logprobs"))
        if grouped:
            records, text = _grouped_answer(question, candidates)
        else:
            probability = yes_probability(question, *candidates[0])
            top = answer_alternatives(probability)
            word = "Yes" if probability >= 0.5 else "No"
            text = str(round(4 * probability)) if prompt.find(GRADED_QUESTION) > 0 else word
            records = [_record(text, top)]
        total, cached, complete = self.server.account([prompt], len(records))
        choice: dict[str, Any] = {"index": 0, "message": {"role": "assistant", "content": text}}
        choice["logprobs"] = {"content": records} if with_logprobs else None
        return {"choices": [choice], "usage": _usage(total, cached, len(records))}, complete

    def _completions(self, body: dict[str, Any]) -> tuple[dict[str, Any], Callable[[], None]]:
        """A completions reply: one choice per prompt, first-token alternatives each."""
        choices = []
        for index, prompt in enumerate(body["prompt"]):
            question, candidates, _ = judged(prompt)
            top = answer_alternatives(yes_probability(question, *candidates[0]))
            token = max(top, key=lambda t: top[t])
            logprobs = {"tokens": [token], "token_logprobs": [top[token]], "top_logprobs": [top]}
            choices.append({"index": index, "text": token, "logprobs": logprobs})
        total, cached, complete = self.server.account(body["prompt"], len(choices))
        return {"choices": choices, "usage": _usage(total, cached, len(choices))}, complete


def _shared_part(prompt: str) -> str:
    """The prompt up to its candidates: what every call of a round has in common."""
    return prompt.split("Candidate passage")[0]


def _record(token: str, top: dict[str, float]) -> dict[str, Any]:
    """A chat-shaped token record."""
    alternatives = [{"token": t, "logprob": lp} for t, lp in top.items()]
    return {"token": token, "logprob": top.get(token, -0.1), "top_logprobs": alternatives}


def _grouped_answer(
    question: str, candidates: list[tuple[str, str]]
) -> tuple[list[dict[str, Any]], str]:
    """Token records and text of the lines "n: yes|no", one per candidate."""
    records: list[dict[str, Any]] = []
    for number, (title, text) in enumerate(candidates, start=1):
        probability = yes_probability(question, title, text)
        word = " yes" if probability >= 0.5 else " no"
        top = {" yes": math.log(probability), " no": math.log1p(-probability)}
        records += [_record(str(number), {}), _record(":", {}), _record(word, top)]
        records.append(_record("\n", {}))
    return records, "".join(record["token"] for record in records)


def _usage(total: int, cached: int, output: int) -> dict[str, Any]:
    """An OpenAI usage record with cached prompt tokens."""
    return {
        "prompt_tokens": total,
        "completion_tokens": output,
        "prompt_tokens_details": {"cached_tokens": cached},
    }


class PlainChatJudge(ChatModelJudge):
    """A chat judge over the server without log-probabilities, as hosted chat APIs are."""

    def __init__(self, base_url: str) -> None:
        super().__init__()
        self._url = f"{base_url}/v1/chat/completions"

    @property
    def identity(self) -> str:
        """``plain-chat``."""
        return "plain-chat"

    async def _ask(self, messages: ChatMessages) -> ChatAnswer:
        """One chat call without logprobs."""
        async with httpx.AsyncClient(trust_env=False) as client:
            reply = (await client.post(self._url, json={"messages": messages})).json()
        counts = read_token_counts(reply["usage"])
        return ChatAnswer(
            reply["choices"][0]["message"]["content"],
            None,
            counts.input_tokens,
            counts.output_tokens,
            counts.cached_input_tokens,
        )


def configurations(base_url: str) -> dict[str, Callable[[], Judge]]:
    """Every transport and mode measured, by label."""

    def compat(**options: Any) -> Callable[[], Judge]:
        return lambda: OpenAICompatJudge(base_url, "sim", **options)

    return {
        "chat, pointwise, no warm-first (before)": compat(warm_first=False, cache_hints=False),
        "chat, pointwise, warm-first + cache key": compat(),
        "completions, batched": compat(transport="completions"),
        "chat, grouped K=10": compat(group_size=10),
        "chat without logprobs, graded 0-4": lambda: PlainChatJudge(base_url),
    }


def run(index: SQLiteIndex, questions: list[str], judge: Judge) -> list[list[str]]:
    """SAG2 on every question with the judge; the final top-10 document ids."""
    engine = SAG2Engine(index, judge)
    try:
        return [[hit.doc_id for hit in engine.retrieve(q, DEPTH).hits] for q in questions]
    finally:
        engine.close()


def main(argv: list[str] | None = None) -> int:
    """Measure every configuration and print a markdown table."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--questions", type=int, default=10, help="first N KAG questions")
    parser.add_argument("--latency", type=float, default=0.005, help="seconds per request")
    args = parser.parse_args(argv)
    kag = load_questions(KAG_QUESTIONS)
    questions = [q.question for q in kag[: args.questions]]
    server = RecordingServer(args.latency)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base_url = f"http://127.0.0.1:{server.server_address[1]}"
    rows, reference = [], None
    with tempfile.TemporaryDirectory() as tmp, SQLiteIndex(Path(tmp) / "kag.db") as index:
        passages = unique_passages(pool_corpus(kag))
        index.add_documents([Document(p.doc_id, p.text, p.title) for p in passages])
        for label, make in configurations(base_url).items():
            server.reset()
            judge = make()
            rankings = run(index, questions, judge)
            reference = reference if reference is not None else rankings
            rows.append((label, server.ledger, judge.usage.snapshot(), rankings == reference))
            print(f"done: {label}", file=sys.stderr)
    server.shutdown()
    n = len(questions)
    print(f"{n} KAG questions; {machine()}; commit {git_revision()}\n")
    print(
        "| judge | calls/q | prompts/q | input tok/q | cached (server) | cached (usage) "
        "| shared (ceiling) | output tok/q | rankings = before |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---|")
    for label, ledger, usage, same in rows:
        print(
            f"| {label} | {ledger.requests / n:.1f} | {ledger.prompts / n:.1f} "
            f"| {ledger.input_tokens / n:,.0f} "
            f"| {ledger.cached_tokens / max(1, ledger.input_tokens):.1%} "
            f"| {usage.cached_input_tokens / max(1, usage.input_tokens):.1%} "
            f"| {ledger.shared_tokens / max(1, ledger.input_tokens):.1%} "
            f"| {ledger.output_tokens / n:.0f} | {'yes' if same else 'no'} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
