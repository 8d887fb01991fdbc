"""Fit the learned judge on SAG2's own judgments over the train fixtures, and write its model.

    # writes sag2_retrievers/data/learned_judge.json:
    python benchmarks/quality/fit_learned_judge.py
    python benchmarks/quality/fit_learned_judge.py --hold-out musique-train   # cross-set check

Pass 1 runs SAG2 (H=2) with the similarity judge as a bootstrap over the MuSiQue and HotpotQA
train fixtures and records every request the engine makes; pass 2 (``--passes 2``) runs again
with the pass-1 model, so the final model also sees the pools its own scores lead to. Labels:
a candidate is positive when it is one of its question's gold (supporting) passages. The fit
is an L2-regularised logistic regression with a fixed penalty; nothing is chosen by looking at
the KAG dev subset, which is for evaluation only. Indexes and embeddings live in ``--runs``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date
from pathlib import Path

import _here  # noqa: F401 - puts benchmarks/ on the import path
import numpy as np
from _common import SHARED_DATA, TRAIN_CORPUS, TRAIN_QUESTIONS, git_revision, machine
from learned_training import Examples, collect_requests, labelled_examples

from sag2_retrievers import Document, SAG2Config, SQLiteIndex
from sag2_retrievers.eval import EvalQuestion, load_corpus, load_questions
from sag2_retrievers.eval.runner import EvalOptions, evaluate
from sag2_retrievers.judges._embeddings import CachedEncoder, EmbeddingCache, MiniLMEncoder
from sag2_retrievers.judges.base import Candidate, Judge, JudgeRequest
from sag2_retrievers.judges.learned import (
    MODEL_FILE,
    LearnedJudge,
    LearnedModel,
    evidence_features,
    fit_model,
)
from sag2_retrievers.judges.offline._evidence_features import FEATURE_NAMES
from sag2_retrievers.judges.similarity import LocalJudge

HOTPOT = SHARED_DATA / "hotpotqa"
TRAIN_SETS = (
    ("musique-train", TRAIN_QUESTIONS, TRAIN_CORPUS),
    (
        "hotpotqa-train",
        HOTPOT / "hipporag_hotpotqa_train_fixture.json",
        HOTPOT / "hipporag_hotpotqa_train_fixture_corpus.json",
    ),
)
PACKAGED = Path(__file__).resolve().parents[2] / "sag2_retrievers" / MODEL_FILE
L2 = 1.0  # fixed a priori (standardised features, ~60,000 rows: a light penalty)


@dataclass
class TrainSet:
    """One train fixture: its questions and an index (with embeddings) over its corpus."""

    name: str
    questions: list[EvalQuestion]
    index: SQLiteIndex


def open_set(
    name: str, questions: Path, corpus: Path, runs: Path, encoder: MiniLMEncoder
) -> TrainSet:
    """Load a fixture and open its index in ``runs``, building and embedding it once."""
    path = runs / f"fit-{name}.sqlite"
    fresh = not path.exists()
    index = SQLiteIndex(path)
    if fresh:
        passages = load_corpus(corpus)
        index.add_documents(Document(p.doc_id, p.text, p.title) for p in passages)
        judge = LocalJudge(cache_path=path, encoder=encoder)
        judge.precompute([Candidate(p.title, p.text) for p in passages])
        judge.close()
    return TrainSet(name, load_questions(questions), index)


def examples_for(sets: Sequence[TrainSet], model: Path | None, encoder: MiniLMEncoder) -> Examples:
    """Record SAG2 (H=2) on every set with the bootstrap or the given model; label and featurise."""
    blocks = []
    for train in sets:
        path = train.index.path
        judge: Judge = (
            LearnedJudge(model_path=model, cache_path=path, encoder=encoder)
            if model is not None
            else LocalJudge(cache_path=path, encoder=encoder)
        )
        started = time.perf_counter()
        pairs = collect_requests(train.index, train.questions, judge)
        embedder = CachedEncoder(encoder, EmbeddingCache(encoder.model_key, path))

        def features(request: JudgeRequest, embedder: CachedEncoder = embedder) -> np.ndarray:
            return evidence_features(embedder, request)

        block = labelled_examples(pairs, features)
        print(
            f"  {train.name}: {len(pairs)} requests, {len(block.labels)} judgments, "
            f"{block.positives} gold, {time.perf_counter() - started:.0f} s",
            flush=True,
        )
        blocks.append(block)
    return Examples(
        np.vstack([b.features for b in blocks]),
        np.concatenate([b.labels for b in blocks]),
        tuple(q for b in blocks for q in b.questions),
    )


def describe(passes: int, examples: Examples, sets: Sequence[TrainSet]) -> dict[str, object]:
    """How the model was fitted, recorded inside the model file."""
    return {
        "command": "python benchmarks/quality/fit_learned_judge.py --passes " + str(passes),
        "date": str(date.today()),
        "commit": git_revision(),
        "machine": machine(),
        "objective": "pointwise logistic regression, L2 on standardised weights",
        "l2": L2,
        "passes": passes,
        "bootstrap_judge": "local similarity judge (all-MiniLM-L6-v2 int8 cosine)",
        "trajectories": "SAG2 H=2, default SAG2Config, every judgment of every round",
        "train_sets": [f"{s.name} ({len(s.questions)} questions)" for s in sets],
        "judgments": len(examples.labels),
        "positives": examples.positives,
        "evaluation_data_used": "none (KAG dev subset never read)",
    }


def report(model: LearnedModel) -> None:
    """Print each feature's standardised weight, largest magnitude first."""
    print("\n| feature | standardised weight |\n|---|---:|")
    for name, weight in sorted(
        zip(FEATURE_NAMES, model.weights, strict=True), key=lambda i: -abs(i[1])
    ):
        print(f"| {name} | {weight:+.3f} |")
    print(f"| (bias) | {model.bias:+.3f} |")


def fit(sets: Sequence[TrainSet], passes: int, runs: Path, encoder: MiniLMEncoder) -> LearnedModel:
    """Pass 1 on the bootstrap judge's trajectories, optionally pass 2 on the model's own."""
    print("pass 1 (bootstrap: similarity judge)")
    examples = examples_for(sets, None, encoder)
    model = fit_model(examples.features, examples.labels, l2=L2, fitted=describe(1, examples, sets))
    if passes == 2:
        first = runs / f"learned_judge_pass1_{'+'.join(s.name for s in sets)}.json"
        first.write_text(json.dumps(model.to_json(), indent=1))
        print("pass 2 (the pass-1 model's own trajectories)")
        second = examples_for(sets, first, encoder)
        examples = Examples(
            np.vstack([examples.features, second.features]),
            np.concatenate([examples.labels, second.labels]),
            examples.questions + second.questions,
        )
        model = fit_model(
            examples.features, examples.labels, l2=L2, fitted=describe(2, examples, sets)
        )
    print(f"fitted on {len(examples.labels)} judgments, {examples.positives} gold")
    return model


def held_out_recall(held: TrainSet, model_path: Path, encoder: MiniLMEncoder) -> None:
    """R@10 on a train set the model was not fitted on: BM25, and each offline judge at H=0/H=2."""
    print(f"\n| {held.name}, held out | R@10 |\n|---|---:|")
    bm25 = asyncio.run(evaluate(held.index, held.questions, None, EvalOptions("bm25")))
    print(f"| BM25 | {bm25.summary()['recall_at']['10']:.2f} |")
    for label, judge in (
        ("similarity judge", LocalJudge(cache_path=held.index.path, encoder=encoder)),
        (
            "learned judge, other set only",
            LearnedJudge(model_path=model_path, cache_path=held.index.path, encoder=encoder),
        ),
    ):
        for hops in (0, 2):
            options = EvalOptions("sag2", SAG2Config(hops=hops), concurrency=1)
            run = asyncio.run(evaluate(held.index, held.questions, judge, options))
            print(f"| {label}, H={hops} | {run.summary()['recall_at']['10']:.2f} |", flush=True)


def main(argv: list[str] | None = None) -> int:
    """Collect the trajectories, fit, and write the model file (or test on a held-out set)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=Path, default=Path("runs"))
    parser.add_argument("--passes", type=int, choices=(1, 2), default=2)
    parser.add_argument("--out", type=Path, default=PACKAGED)
    parser.add_argument(
        "--hold-out",
        choices=[name for name, _, _ in TRAIN_SETS],
        help="fit on the other train set only and report R@10 on this one (writes to --runs)",
    )
    args = parser.parse_args(argv)
    args.runs.mkdir(parents=True, exist_ok=True)
    print(f"Fit {date.today()} on {machine()}, commit {git_revision()}.")
    encoder = MiniLMEncoder()
    sets = [open_set(name, q, c, args.runs, encoder) for name, q, c in TRAIN_SETS]
    fitted_on = [s for s in sets if s.name != args.hold_out]
    model = fit(fitted_on, args.passes, args.runs, encoder)
    out = args.out if args.hold_out is None else args.runs / f"learned_without_{args.hold_out}.json"
    out.write_text(json.dumps(model.to_json(), indent=1) + "\n")
    print(f"wrote {out}")
    report(model)
    if args.hold_out is not None:
        held_out_recall(next(s for s in sets if s.name == args.hold_out), out, encoder)
    return 0


if __name__ == "__main__":
    sys.exit(main())
