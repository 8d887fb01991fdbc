"""This package's two analyzer profiles against the authors' port (zleap-sag2), step by step.

Both engines index the same passages in the same order and get one deterministic judge
(`_overlap_crc_judge.py`: the same score for the same candidate, context ignored); the port
runs in its own virtualenv through `_port_child.py`. Per shared set and profile: mean top-10
Jaccard with the port, the share of questions with the identical top-10 order, BM25 top-100
agreement, judgments per question (ours / the port's), and for each disagreeing question the
first step that differs (query tokens, BM25 list, seeds, expansion terms, judged pools,
top-10 before the diversity step, diversity order).

The port is never a dependency of this project. Install it apart, then pass its Python:

    python -m venv /work/portvenv && /work/portvenv/bin/pip install zleap-sag2==0.2.0.post1
    python benchmarks/quality/port_agreement.py --port-python /work/portvenv/bin/python

(or set SAG2_PORT_PYTHON). ``--details`` prints every disagreeing question's first differing
step with both sides' values.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date
from itertools import zip_longest
from pathlib import Path
from typing import Any

import _here  # noqa: F401 - puts benchmarks/ on the import path
from _common import KAG_QUESTIONS, TRAIN_CORPUS, TRAIN_QUESTIONS, git_revision, machine
from _overlap_crc_judge import overlap_crc_score

from sag2_retrievers import Document, IndexSettings, SAG2Engine, SQLiteIndex
from sag2_retrievers.analysis import PROFILES, Profile, distinct_tokens
from sag2_retrievers.eval import EvalQuestion, Passage, load_corpus, load_questions, pool_corpus
from sag2_retrievers.eval.datasets import unique_passages
from sag2_retrievers.judges.base import Judge, JudgeRequest
from sag2_retrievers.query import query_terms

CHILD = Path(__file__).with_name("_port_child.py")
INSTALL_HINT = (
    "install the authors' port in its own virtualenv (never into this project's): "
    "python -m venv /work/portvenv && /work/portvenv/bin/pip install zleap-sag2==0.2.0.post1, "
    "then pass --port-python /work/portvenv/bin/python or set SAG2_PORT_PYTHON"
)


class OverlapCrcJudge(Judge):
    """The shared deterministic judge (`_overlap_crc_judge.py`) as this package's Judge."""

    @property
    def identity(self) -> str:
        """The judge's stable name."""
        return "overlap-crc"

    async def _score(self, request: JudgeRequest) -> list[float]:
        """One score per candidate from its own title and text; the context is ignored."""
        return [overlap_crc_score(request.question, c.title, c.text) for c in request.candidates]


class RecordingEngine(SAG2Engine):
    """The engine, noting the top units it hands to the diversity step (for the diagnosis)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.before_diversity: list[int] = []

    def _diversified(self, state: Any, ranking: list[int]) -> list[int]:
        """Record the units' order before the reordering, then reorder as the engine does."""
        self.before_diversity = ranking[: self.config.diversity_top]
        return super()._diversified(state, ranking)


@dataclass(frozen=True)
class SharedSet:
    """One shared evaluation set: its passages in index order and its questions."""

    slug: str
    title: str
    passages: Sequence[Passage]
    questions: Sequence[EvalQuestion]


def port_python(requested: str | None) -> str:
    """The port virtualenv's Python, checked to import the port; exits naming how to install."""
    python = requested or os.environ.get("SAG2_PORT_PYTHON")
    if not python:
        raise SystemExit(f"port_agreement: no port Python given; {INSTALL_HINT}")
    probe = [python, "-c", "import zleap.sag2"]
    try:
        found = subprocess.run(probe, capture_output=True, check=False).returncode == 0
    except OSError:
        found = False
    if not found:
        raise SystemExit(f"port_agreement: {python!r} cannot import zleap.sag2; {INSTALL_HINT}")
    return python


def port_records(python: str, shared: SharedSet, folder: Path) -> dict[str, dict[str, Any]]:
    """The port's per-question records for a set, run in the port's virtualenv."""
    source, target = folder / f"{shared.slug}-in.json", folder / f"{shared.slug}-port.json"
    passages = [{"key": p.doc_id, "title": p.title, "text": p.text} for p in shared.passages]
    questions = [{"id": q.id, "question": q.question} for q in shared.questions]
    source.write_text(json.dumps({"passages": passages, "questions": questions}))
    subprocess.run([python, str(CHILD), str(source), str(target)], check=True)
    return {record["id"]: record for record in json.loads(target.read_text())}


async def our_records(
    shared: SharedSet, profile: Profile, folder: Path
) -> dict[str, dict[str, Any]]:
    """This package's per-question records for a set under one analyzer profile."""
    path = folder / f"{shared.slug}-{profile}.sqlite"
    # Units hold whole passages (the longest shared passage is under 2,000 characters).
    settings = IndexSettings(chunk_chars=10_000, analyzer_profile=profile)
    records = {}
    with SQLiteIndex(path, settings) as index:
        index.add_documents(
            (Document(p.doc_id, p.text, p.title) for p in shared.passages), parallel=False
        )
        engine = RecordingEngine(index, OverlapCrcJudge())
        for question in shared.questions:
            engine.before_diversity = []
            result = await engine.aretrieve(question.question, 10)
            records[question.id] = _our_record(index, engine, question.question, result)
        await engine.aclose()
    return records


def _our_record(index: SQLiteIndex, engine: RecordingEngine, question: str, result: Any) -> dict:
    """One retrieval as unit keys, in the shape `_port_child.question_record` writes."""
    profile = index.settings.analyzer_profile
    trace = result.trace
    ids = {u for t in trace for u in (*t.pool, *t.seeds)} | set(engine.before_diversity)
    bm25 = [hit.unit_id for hit in index.search(question, 100)]
    keys = {u: unit.doc_id for u, unit in index.units([*ids, *bm25]).items()}
    return {
        "tokens": distinct_tokens(question, 80, profile=profile),
        "terms": query_terms(index, question, 80),
        "bm25": [keys[u] for u in bm25],
        "rounds": [
            {
                "seeds": [keys[u] for u in t.seeds],
                "terms": [term for term, _ in t.terms],
                "pool": sorted(keys[u] for u in t.pool),
            }
            for t in trace
        ],
        "before_diversity": [keys[u] for u in engine.before_diversity],
        "top10": [hit.doc_id for hit in result.hits],
        "judgments": result.judgments,
    }


def steps(record: dict[str, Any]) -> list[tuple[str, Any]]:
    """A record's compared steps, in the order the method takes them."""
    listed: list[tuple[str, Any]] = [("query terms", record["terms"]), ("BM25", record["bm25"])]
    for number, round_ in enumerate(record["rounds"]):
        if number:
            listed += [(f"seeds {number}", round_["seeds"]), (f"terms {number}", round_["terms"])]
        listed.append((f"pool {number}", round_["pool"]))
    listed += [("pre-DPP top 10", record["before_diversity"]), ("DPP order", record["top10"])]
    return listed


def first_difference(ours: dict[str, Any], port: dict[str, Any]) -> tuple[str, Any, Any] | None:
    """The first compared step at which the records differ (name, ours, port), or None."""
    for (name, mine), (other, theirs) in zip_longest(
        steps(ours), steps(port), fillvalue=("", None)
    ):
        if name != other or mine != theirs:
            return name or other, mine, theirs
    return None


def jaccard(first: Sequence[str], second: Sequence[str]) -> float:
    """|A & B| / |A | B| of two top-10 lists (1 when both are empty)."""
    union = set(first) | set(second)
    return len(set(first) & set(second)) / len(union) if union else 1.0


def summary_row(
    shared: SharedSet, profile: str, ours: dict[str, dict], port: dict[str, dict]
) -> tuple[str, Counter[str]]:
    """The table row of one set and profile, and the count of first differing steps."""
    ids = [q.id for q in shared.questions]
    jaccards = [jaccard(ours[i]["top10"], port[i]["top10"]) for i in ids]
    same = sum(ours[i]["top10"] == port[i]["top10"] for i in ids)
    bm25 = [jaccard(ours[i]["bm25"], port[i]["bm25"]) for i in ids]
    ours_j = sum(ours[i]["judgments"] for i in ids) / len(ids)
    port_j = sum(port[i]["judgments"] for i in ids) / len(ids)
    found = [first_difference(ours[i], port[i]) for i in ids]
    counts = Counter(difference[0] for difference in found if difference)
    listed = ", ".join(f"{name} {n}" for name, n in counts.most_common()) or "none"
    row = (
        f"| {shared.title} | {profile} | {sum(jaccards) / len(ids):.4f} | "
        f"{100 * same / len(ids):.0f}% | {sum(bm25) / len(ids):.4f} | "
        f"{ours_j:.1f} / {port_j:.1f} | {listed} |"
    )
    return row, counts


def detail_lines(
    shared: SharedSet, profile: str, ours: dict[str, dict], port: dict[str, dict]
) -> list[str]:
    """For each disagreeing question: its first differing step and both sides' values."""
    lines = []
    for question in shared.questions:
        mine, theirs = ours[question.id], port[question.id]
        difference = first_difference(mine, theirs)
        if difference is None:
            continue
        name, left, right = difference
        lines.append(f"- {shared.slug} {profile} {question.id}: {name}")
        lines.append(f"  question: {question.question}")
        lines.append(f"  ours: {_difference(left, right)}")
        lines.append(f"  port: {_difference(right, left)}")
    return lines


def _difference(value: Any, other: Any) -> str:
    """A step's value and what of it the other side lacks."""
    if not isinstance(value, list) or not isinstance(other, list):
        return repr(value)
    return f"only here: {_only(value, other)}; in order: {value}"


def _only(value: Sequence[Any], other: Sequence[Any]) -> list[Any]:
    """Entries of ``value`` missing from ``other``."""
    present = set(map(str, other))
    return [v for v in value if str(v) not in present]


def shared_sets(limit: int | None) -> list[SharedSet]:
    """The KAG subset (pooled corpus) and the MuSiQue train fixture."""
    kag = load_questions(KAG_QUESTIONS)[:limit]
    train = load_questions(TRAIN_QUESTIONS)[:limit]
    kag_passages = unique_passages(pool_corpus(load_questions(KAG_QUESTIONS)))
    return [
        SharedSet("kag", "MuSiQue KAG subset", kag_passages, kag),
        SharedSet(
            "train", "MuSiQue train fixture", unique_passages(load_corpus(TRAIN_CORPUS)), train
        ),
    ]


def main(argv: list[str] | None = None) -> int:
    """Run both sets through the port and both profiles; print the markdown table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port-python", help="the port virtualenv's python")
    parser.add_argument("--profiles", nargs="+", default=list(PROFILES), choices=PROFILES)
    parser.add_argument("--limit", type=int, help="only the first N questions of each set")
    parser.add_argument("--details", action="store_true", help="list disagreeing questions")
    args = parser.parse_args(argv)
    python = port_python(args.port_python)
    rows = [
        "| set | profile | mean top-10 Jaccard | identical top-10 order | BM25 top-100 "
        "Jaccard | judgments per question (ours / port) | first differing step |",
        "|---|---|---:|---:|---:|---:|---|",
    ]
    details: list[str] = []
    with tempfile.TemporaryDirectory(prefix="port-agreement-") as scratch:
        folder = Path(scratch)
        for shared in shared_sets(args.limit):
            port = port_records(python, shared, folder)
            for profile in args.profiles:
                ours = asyncio.run(our_records(shared, profile, folder))
                row, _ = summary_row(shared, profile, ours, port)
                rows.append(row)
                print(row, file=sys.stderr, flush=True)
                if args.details:
                    details += detail_lines(shared, profile, ours, port)
    header = (
        f"Command: `python benchmarks/quality/port_agreement.py --port-python PORT_PYTHON"
        f"{f' --limit {args.limit}' if args.limit else ''}`; {date.today().isoformat()}, "
        f"revision {git_revision()}, port zleap-sag2 0.2.0.post1, {machine()}."
    )
    print("\n".join([header, "", *rows, "", *details]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
