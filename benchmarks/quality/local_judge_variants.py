"""Fit the local judge on MuSiQue train questions and compare its variants on MuSiQue dev.

    python benchmarks/quality/local_judge_variants.py fit        # train fixture only
    python benchmarks/quality/local_judge_variants.py evaluate   # KAG dev subset (or --split train)

`fit` chooses the context weight of the "question+context" variant by SAG2 (H=2) R@10 on the
100 train-fixture questions, then fits each variant's logistic calibration (slope, intercept)
on every judgment SAG2 asks of it there, labelled by MuSiQue's is_supporting; paste the printed
constants into sag2_retrievers/judges/similarity.py. `evaluate` reports R@k and AE@10 of BM25 and of
each variant at H=0 (BM25 top-100 ranked by the judge) and with expansion rounds. The dev
questions are never used for fitting. Indexes and the embedding cache live in --work.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

from sag2_retrievers import Document, SAG2Config, SQLiteIndex
from sag2_retrievers.engine import SAG2Engine
from sag2_retrievers.eval.datasets import (
    EvalQuestion,
    Passage,
    load_corpus,
    load_questions,
    pool_corpus,
)
from sag2_retrievers.eval.metrics import QuestionResult, summarize
from sag2_retrievers.judges import similarity
from sag2_retrievers.judges._embeddings import MiniLMEncoder, Vectors
from sag2_retrievers.judges.base import JudgeRequest
from sag2_retrievers.judges.similarity import CALIBRATIONS, LocalJudge, Variant

DATA = Path(__file__).resolve().parents[3] / "shared" / "data" / "musique"
SPLITS = {
    "train": ("hipporag_musique_train_fixture.json", "hipporag_musique_train_fixture_corpus.json"),
    "dev": ("kag_musique_qa_100_hipporag_subset.json", None),
}
VARIANTS: tuple[Variant, ...] = ("question", "question+context")
CONTEXT_WEIGHT_GRID = (0.1, 0.25, 0.5, 1.0)
KS = (2, 5, 10)


@dataclass(frozen=True)
class Split:
    """A question set, its corpus, and an index built over that corpus."""

    questions: list[EvalQuestion]
    identity_of: dict[str, str]
    index: SQLiteIndex


class RecordingJudge(LocalJudge):
    """A LocalJudge that keeps each (question, candidate identity, similarity) it scores."""

    def __init__(self, variant: Variant, cache_path: Path, encoder: MiniLMEncoder) -> None:
        super().__init__(variant, cache_path=cache_path, encoder=encoder)
        self.records: list[tuple[str, str, float]] = []

    def score_now(self, request: JudgeRequest) -> list[float]:
        """Score as usual and remember the raw similarities."""
        similarities = self.similarities(request)
        self.records.extend(
            (request.question, f"{candidate.title}\n{candidate.text}", float(similarity))
            for candidate, similarity in zip(request.candidates, similarities, strict=True)
        )
        return CALIBRATIONS[self.variant].probabilities(similarities)


def load_split(name: str, data: Path, work: Path) -> Split:
    """Load a split's questions and corpus, and open (building once) its index in ``work``."""
    questions_file, corpus_file = SPLITS[name]
    questions = load_questions(data / questions_file)
    corpus: list[Passage] = (
        load_corpus(data / corpus_file) if corpus_file else pool_corpus(questions)
    )
    path = work / f"{name}.sqlite"
    is_new = not path.exists()
    index = SQLiteIndex(path)
    if is_new:
        index.add_documents(Document(p.doc_id, p.text, p.title) for p in corpus)
    return Split(questions, {p.doc_id: p.identity for p in corpus}, index)


def bm25_results(split: Split) -> list[QuestionResult]:
    """The plain BM25 ranking of each question."""
    return [
        QuestionResult(
            q.id, q.gold, tuple(split.identity_of[h.doc_id] for h in split.index.search(q.question))
        )
        for q in split.questions
    ]


def engine_results(
    split: Split, judge: LocalJudge, hops: int
) -> tuple[list[QuestionResult], float, float]:
    """SAG2 with the judge: results, judgments per question, seconds per question."""
    engine = SAG2Engine(split.index, judge, SAG2Config(hops=hops))
    results: list[QuestionResult] = []
    judgments = 0
    started = time.perf_counter()
    for q in split.questions:
        answer = engine.retrieve(q.question, 10)
        judgments += answer.judgments
        retrieved = tuple(split.identity_of[hit.doc_id] for hit in answer.hits)
        results.append(QuestionResult(q.id, q.gold, retrieved))
    elapsed = time.perf_counter() - started
    engine.close()
    count = len(split.questions)
    return results, judgments / count, elapsed / count


def fit_logistic(x: Vectors, y: npt.NDArray[np.float64]) -> tuple[float, float]:
    """Maximum-likelihood (slope, intercept) of P(y=1) = sigmoid(slope*x + intercept), by Newton."""
    features = np.stack([x.astype(np.float64), np.ones(len(x))], axis=1)
    weights = np.zeros(2)
    for _ in range(100):
        p = 1.0 / (1.0 + np.exp(-features @ weights))
        gradient = features.T @ (p - y)
        hessian = (features.T * (p * (1.0 - p))) @ features + 1e-9 * np.eye(2)
        step = np.linalg.solve(hessian, gradient)
        weights -= step
        if np.abs(step).max() < 1e-10:
            break
    return float(weights[0]), float(weights[1])


def row(label: str, results: Sequence[QuestionResult], extra: str = "") -> str:
    """One markdown table row of R@k and AE@10."""
    summary = summarize(results, ks=KS)
    recalls = " | ".join(f"{summary['recall_at'][str(k)]:.2f}" for k in KS)
    return f"| {label} | {recalls} | {summary['ae_at']['10']:.1f} | {extra} |"


def choose_context_weight(split: Split, cache: Path, encoder: MiniLMEncoder) -> float:
    """The grid weight with the best H=2 R@10 on the split (the smallest on ties)."""
    best = (-1.0, 0.0)
    for weight in CONTEXT_WEIGHT_GRID:
        similarity.CONTEXT_WEIGHT = weight  # read by the judge at scoring time
        judge = LocalJudge("question+context", cache_path=cache, encoder=encoder)
        results, _, _ = engine_results(split, judge, hops=2)
        print(row(f"question+context, weight {weight}, H=2", results), flush=True)
        recall = summarize(results, ks=(10,))["recall_at"]["10"]
        best = max(best, (recall, -weight))
    return -best[1]


def fit(work: Path, data: Path) -> None:
    """Choose the context weight, then fit each variant's calibration on train judgments."""
    split = load_split("train", data, work)
    encoder = MiniLMEncoder()
    cache = work / "embeddings.sqlite"
    print("| train, fitting | R@2 | R@5 | R@10 | AE@10 | |\n|---|---|---|---|---|---|")
    similarity.CONTEXT_WEIGHT = choose_context_weight(split, cache, encoder)
    print(f"\nCONTEXT_WEIGHT = {similarity.CONTEXT_WEIGHT}")
    gold = {q.question: set(q.gold) for q in split.questions}
    for variant in VARIANTS:
        judge = RecordingJudge(variant, cache, encoder)
        engine_results(split, judge, hops=2)
        x = np.array([similarity for _, _, similarity in judge.records], dtype=np.float32)
        y = np.array([identity in gold[q] for q, identity, _ in judge.records], dtype=np.float64)
        slope, intercept = fit_logistic(x, y)
        print(
            f'"{variant}": Calibration(slope={slope:.2f}, intercept={intercept:.2f}),'
            f"  # {len(x)} judgments, {int(y.sum())} supporting"
        )


def evaluate(work: Path, data: Path, split_name: str, hops: Sequence[int]) -> None:
    """Print R@k of BM25 and of each variant at each number of expansion rounds."""
    split = load_split(split_name, data, work)
    encoder = MiniLMEncoder()
    cache = work / "embeddings.sqlite"
    print(f"| {split_name} ({len(split.questions)} questions) | R@2 | R@5 | R@10 | AE@10 | cost |")
    print("|---|---|---|---|---|---|")
    print(row("BM25", bm25_results(split)))
    for variant in VARIANTS:
        for rounds in hops:
            judge = LocalJudge(variant, cache_path=cache, encoder=encoder)
            results, judgments, seconds = engine_results(split, judge, rounds)
            cost = f"{judgments:.0f} judgments/q, {seconds:.2f} s/q"
            print(row(f"local {variant}, H={rounds}", results, cost), flush=True)


def main() -> None:
    """Parse the command line and run `fit` or `evaluate`."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=("fit", "evaluate"))
    parser.add_argument("--work", type=Path, default=Path(tempfile.gettempdir()) / "sag2-local")
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--split", choices=tuple(SPLITS), default="dev")
    parser.add_argument("--hops", type=int, nargs="+", default=[0, 2])
    arguments = parser.parse_args()
    arguments.work.mkdir(parents=True, exist_ok=True)
    if arguments.command == "fit":
        fit(arguments.work, arguments.data)
    else:
        evaluate(arguments.work, arguments.data, arguments.split, arguments.hops)


if __name__ == "__main__":
    main()
