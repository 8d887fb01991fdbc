"""Fit the pool judge's boosted trees on SAG2's own trajectories over train-split questions.

    python benchmarks/fit_pool_judge.py      # writes sag2_retrievers/data/pool_judge.json
    python benchmarks/fit_pool_judge.py --hold-out musique-train   # fit without it: its R@10

Train sets: the MuSiQue and HotpotQA train fixtures of ``shared/data`` and the train-split
unions of ``shared/traindata`` (2WikiMultiHopQA, MuSiQue, HotpotQA, IIRC), each set's
paragraphs pooled into one index. Trajectories: SAG2 (H=2) is run with two teachers (the
lexical overlap judge, and a noisy oracle that scores gold passages high, so the later rounds
also show contexts that hold the evidence), then ``--passes`` more times with the model fitted
so far, so the model sees the pools its own scores lead to. Every judged candidate is a row,
labelled 1 when it is one of its question's gold passages; each set weighs the same in total.
The KAG dev subset is never read.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date
from pathlib import Path

import lightgbm
import numpy as np
from _common import SHARED_DATA, TRAIN_CORPUS, TRAIN_QUESTIONS, git_revision, machine
from learned_training import collect_requests

from sag2_retrievers import Document, SAG2Config, SQLiteIndex
from sag2_retrievers.eval import EvalQuestion, load_corpus, load_questions, pool_corpus
from sag2_retrievers.eval.runner import EvalOptions, evaluate
from sag2_retrievers.judges.base import Judge, JudgeRequest
from sag2_retrievers.judges.fake import OverlapJudge
from sag2_retrievers.judges.pool import MODEL_FILE, PoolJudge, PoolModel
from sag2_retrievers.judges.pool_features import POOL_FEATURE_NAMES, pool_features
from sag2_retrievers.judges.trees import from_lightgbm_dump

TRAINDATA = SHARED_DATA.parent / "traindata"
HOTPOT = SHARED_DATA / "hotpotqa"
PACKAGED = Path(__file__).resolve().parents[1] / "sag2_retrievers" / MODEL_FILE
# Fixed a priori, not searched: a small, shallow ensemble with a light regulariser.
PARAMETERS: dict[str, object] = {
    "objective": "binary",
    "learning_rate": 0.05,
    "num_leaves": 31,
    "min_data_in_leaf": 40,
    "feature_fraction": 0.8,
    "bagging_fraction": 0.8,
    "bagging_freq": 1,
    "lambda_l2": 1.0,
    "verbose": -1,
    "num_threads": 2,
    "seed": 13,
    "deterministic": True,
}
ROUNDS = 300
FEATURE_CODE = hashlib.sha256(
    b"".join(
        (Path(pool_features.__code__.co_filename).parent / name).read_bytes()
        for name in ("pool_features.py", "pool_graph.py", "_evidence_features.py")
    )
).hexdigest()[:12]


@dataclass
class TrainSet:
    """One train set: its questions and an index over its pooled corpus."""

    name: str
    questions: list[EvalQuestion]
    index: SQLiteIndex


@dataclass
class Rows:
    """Feature rows with labels, weights and the request (group) each row belongs to."""

    features: np.ndarray
    labels: np.ndarray
    weights: np.ndarray
    groups: list[int]


class NoisyOracle(Judge):
    """A teacher for trajectories: gold passages score in [0.5, 1], others in [0, 0.6].

    Deterministic (the noise is a hash of question and passage); used only to show the model
    rounds whose context holds the evidence, never as a label.
    """

    def __init__(self, gold: dict[str, set[str]]) -> None:
        super().__init__()
        self.gold = gold

    @property
    def identity(self) -> str:
        """Names the teacher."""
        return "noisy-oracle"

    async def _score(self, request: JudgeRequest) -> list[float]:
        """Score each candidate from its gold label and a hash."""
        gold = self.gold.get(request.question, set())
        scores = []
        for c in request.candidates:
            digest = hashlib.sha256(f"{request.question}\n{c.title}\n{c.text}".encode()).digest()
            noise = digest[0] / 255.0
            scores.append(0.5 + 0.5 * noise if f"{c.title}\n{c.text}" in gold else 0.6 * noise)
        return scores


def train_sets() -> list[tuple[str, list[EvalQuestion], list[Document]]]:
    """Every train set as (name, questions, documents of its corpus)."""
    sets = []
    fixtures = (
        ("musique-train", TRAIN_QUESTIONS, TRAIN_CORPUS),
        (
            "hotpotqa-train",
            HOTPOT / "hipporag_hotpotqa_train_fixture.json",
            HOTPOT / "hipporag_hotpotqa_train_fixture_corpus.json",
        ),
    )
    for name, questions_path, corpus_path in fixtures:
        passages = load_corpus(corpus_path)
        sets.append((name, load_questions(questions_path), _documents(passages)))
    for dataset in ("2wikimultihopqa", "musique", "hotpotqa", "iirc"):
        path = TRAINDATA / dataset / f"{dataset}_train_union.jsonl"
        questions = load_questions(path)
        sets.append((f"{dataset}-union", questions, _documents(pool_corpus(questions))))
    return sets


def _documents(passages: Sequence[object]) -> list[Document]:
    """Index documents keyed by the passages' stable ids."""
    return [Document(p.doc_id, p.text, p.title) for p in passages]  # type: ignore[attr-defined]


def open_sets(runs: Path) -> list[TrainSet]:
    """Open (building once) an index per train set in ``runs``."""
    opened = []
    for name, questions, documents in train_sets():
        path = runs / f"pool-{name}.sqlite"
        fresh = not path.exists()
        index = SQLiteIndex(path)
        if fresh:
            index.add_documents(documents, parallel=False)
        opened.append(TrainSet(name, questions, index))
        print(f"  {name}: {len(questions)} questions, {index.unit_count()} passages", flush=True)
    return opened


class FeaturingJudge(PoolJudge):
    """A pool judge that keeps the feature matrix of every request it scores, for reuse."""

    def __init__(self, model_path: Path) -> None:
        super().__init__(model_path=model_path)
        self.features: dict[int, np.ndarray] = {}

    def score_now(self, request: JudgeRequest) -> list[float]:
        """Score as the pool judge does, remembering the features by request."""
        features = pool_features(request)
        self.features[id(request)] = features
        return self.model.probabilities(features)


def rows_for(train: TrainSet, judge: Judge, first_group: int) -> Rows:
    """Record SAG2 (H=2) on one set with ``judge``; featurise and label every judgment."""
    pairs = collect_requests(train.index, train.questions, judge, SAG2Config(hops=2))
    known = judge.features if isinstance(judge, FeaturingJudge) else {}
    blocks, labels, groups = [], [], []
    for group, (question, request) in enumerate(pairs, start=first_group):
        gold = set(question.gold)
        blocks.append(known[id(request)] if id(request) in known else pool_features(request))
        labels.extend(float(f"{c.title}\n{c.text}" in gold) for c in request.candidates)
        groups.extend(group for _ in request.candidates)
    features = np.vstack(blocks)
    return Rows(features, np.asarray(labels), set_weights(len(labels), train), groups)


def set_weights(rows: int, train: TrainSet) -> np.ndarray:
    """Row weights giving every set the same total weight per pass, whatever its size (a
    square-root share did worse on held-out MuSiQue train: 74.50 against 78.25 R@10)."""
    return np.full(rows, 1.0 / max(len(train.questions), 1))


def collect(
    sets: Sequence[TrainSet],
    judge_for: dict[str, Judge],
    rows: list[Rows],
    cache: Path | None = None,
) -> None:
    """Append one pass of trajectories per set (each set with its own judge).

    With ``cache`` (a folder), a teacher's rows are kept there under a key of the feature
    code, so a re-run with unchanged features skips the teacher passes.
    """
    for train in sets:
        started = time.perf_counter()
        first = max((r.groups[-1] + 1 for r in rows if r.groups), default=0)
        judge = judge_for[train.name]
        key = f"rows-{train.name}-{judge.identity}-{FEATURE_CODE}.npz"
        path = None if cache is None else cache / key
        if path is not None and path.exists():
            saved = np.load(path)
            groups = [int(g) + first for g in saved["groups"]]
            weights = set_weights(len(saved["labels"]), train)
            block = Rows(saved["features"], saved["labels"], weights, groups)
        else:
            block = rows_for(train, judge, first)
            if path is not None:
                relative = np.asarray(block.groups) - first
                np.savez(
                    path,
                    features=block.features,
                    labels=block.labels,
                    weights=block.weights,
                    groups=relative,
                )
        rows.append(block)
        print(
            f"  {train.name}: {len(block.labels)} judgments, {int(block.labels.sum())} gold, "
            f"{time.perf_counter() - started:.0f} s",
            flush=True,
        )


def fit(
    rows: Sequence[Rows],
    fitted: dict[str, object],
    *,
    parameters: dict[str, object] = PARAMETERS,
    rounds: int = ROUNDS,
) -> PoolModel:
    """Fit the trees on every row collected so far; each set-pass weighs the same in total."""
    features = np.vstack([r.features for r in rows])
    labels = np.concatenate([r.labels for r in rows])
    weights = np.concatenate([r.weights for r in rows])
    data = lightgbm.Dataset(features, labels, weight=weights / weights.mean(), free_raw_data=False)
    if parameters.get("objective") == "lambdarank":
        groups = np.concatenate([np.asarray(r.groups) for r in rows])
        data = lightgbm.Dataset(features, labels, group=np.unique(groups, return_counts=True)[1])
    booster = lightgbm.train(parameters, data, rounds)
    trees = from_lightgbm_dump(booster.dump_model())
    check = features[:: max(1, len(features) // 2000)]
    gap = float(np.abs(trees.raw_scores(check) - booster.predict(check, raw_score=True)).max())
    if gap > 1e-9:
        raise RuntimeError(f"numpy trees disagree with LightGBM by {gap}")
    gains = booster.feature_importance(importance_type="gain")
    fitted = {
        **fitted,
        "judgments": len(labels),
        "positives": int(labels.sum()),
        "importance_gain": {
            n: round(float(g), 1)
            for n, g in sorted(zip(POOL_FEATURE_NAMES, gains, strict=True), key=lambda i: -i[1])
        },
    }
    return PoolModel(trees, fitted)


def describe(passes: int, sets: Sequence[TrainSet]) -> dict[str, object]:
    """How the model was fitted, recorded inside the model file."""
    return {
        "command": f"python benchmarks/fit_pool_judge.py --passes {passes}",
        "date": str(date.today()),
        "commit": git_revision(),
        "machine": machine(),
        "library": f"lightgbm {lightgbm.__version__}",
        "parameters": PARAMETERS,
        "rounds": ROUNDS,
        "teachers": "lexical overlap judge; noisy oracle (gold in [0.5, 1], others in [0, 0.6])",
        "passes": passes,
        "trajectories": "SAG2 H=2, default SAG2Config, every judgment of every round",
        "train_sets": [f"{s.name} ({len(s.questions)} questions)" for s in sets],
        "evaluation_data_used": "none (KAG dev subset never read)",
    }


def train(sets: Sequence[TrainSet], passes: int, runs: Path) -> PoolModel:
    """Teachers' trajectories, then ``passes`` rounds of the model's own."""
    rows: list[Rows] = []
    print("teacher: overlap judge", flush=True)
    collect(sets, {s.name: OverlapJudge() for s in sets}, rows, runs)
    print("teacher: noisy oracle", flush=True)
    oracles = {s.name: NoisyOracle({q.question: set(q.gold) for q in s.questions}) for s in sets}
    collect(sets, dict(oracles), rows, runs)
    model = fit(rows, describe(0, sets))
    for number in range(1, passes + 1):
        path = runs / f"pool_judge_pass{number - 1}.json"
        path.write_text(json.dumps(model.to_json()))
        print(f"pass {number}: the model's own trajectories", flush=True)
        collect(sets, {s.name: FeaturingJudge(path) for s in sets}, rows)
        model = fit(rows, describe(number, sets))
    return model


def held_out_recall(held: TrainSet, model_path: Path) -> None:
    """R@10 on a train set the model was not fitted on: BM25, then the judge at H=0 and H=2."""
    print(f"\n| {held.name}, held out | R@10 |\n|---|---:|")
    bm25 = asyncio.run(evaluate(held.index, held.questions, None, EvalOptions("bm25")))
    print(f"| BM25 | {bm25.summary()['recall_at']['10']:.2f} |")
    for hops in (0, 1, 2):
        options = EvalOptions("sag2", SAG2Config(hops=hops), concurrency=1)
        run = asyncio.run(
            evaluate(held.index, held.questions, PoolJudge(model_path=model_path), options)
        )
        last = run.pool_summary()["rounds"][-1]
        print(
            f"| pool judge, H={hops} | {run.summary()['recall_at']['10']:.2f} "
            f"| pool {last['gold_in_pool']:.1f}, not top 10 {last['in_pool_not_top_10']:.1f} |",
            flush=True,
        )


def main(argv: list[str] | None = None) -> int:
    """Collect the trajectories, fit, and write the model file (or test on a held-out set)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=Path, default=Path("runs"))
    parser.add_argument("--passes", type=int, default=2)
    parser.add_argument("--out", type=Path, default=PACKAGED)
    parser.add_argument("--hold-out", help="fit without this set and report R@10 on it")
    parser.add_argument("--objective", choices=("binary", "lambdarank"), default="binary")
    args = parser.parse_args(argv)
    args.runs.mkdir(parents=True, exist_ok=True)
    print(f"Fit {date.today()} on {machine()}, commit {git_revision()}.", flush=True)
    sets = open_sets(args.runs)
    fitted_on = [s for s in sets if s.name != args.hold_out]
    PARAMETERS["objective"] = args.objective
    model = train(fitted_on, args.passes, args.runs)
    out = args.out if args.hold_out is None else args.runs / f"pool_without_{args.hold_out}.json"
    out.write_text(json.dumps(model.to_json(), separators=(",", ":")) + "\n")
    print(f"wrote {out}")
    print(json.dumps(model.fitted["importance_gain"], indent=1))
    if args.hold_out is not None:
        held_out_recall(next(s for s in sets if s.name == args.hold_out), out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
