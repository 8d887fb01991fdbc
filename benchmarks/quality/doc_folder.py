"""A documentation folder with questions whose answer file is known: R@10 of BM25 and SAG2, BM25
top-3 answers SAG2 drops, and the engine's time per question against the fake judge's.

    python benchmarks/quality/doc_folder.py [--questions FILE.json] [--judges local fake]
                                    [--index-dir DIR] [--out FILE.json] [--read-compressed]

The hand-written questions (`doc_folder_questions.json`) ask what a user of a Debian system
would: a package's licence, what it is, how to configure it, release-note facts, API pages (in
/usr/share/doc), and which standard module does what (in /usr/lib/python3.11). Each names the
files that answer it, as paths inside its folder (the ids `sag2 index DIR` gives); a file whose
bytes equal an answer's counts as that answer (Debian ships one copyright text under several
packages). Answer files missing on this machine are left out of a question, and a question
left with none is skipped and counted. Each folder is indexed once with `sag2 index`; each
question then runs BM25 (`bm25_retrieve`, the top 10 unique sources) and SAG2 with every
judge in-process, the judges taking turns in a rotating order so machine load hits them alike.
A question is "dropped" when a file BM25 ranks in its top 3 answers it and SAG2's top 10 lacks
that file. Engine time is the trace's local + judge seconds summed over the rounds (what `sag2
query --json` reports); the fake judge is instant, so its time is the engine's lexical cost.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Any

import _here  # noqa: F401 - puts benchmarks/ on the import path
from _common import git_revision, machine

from sag2_retrievers import SAG2Engine, SQLiteIndex
from sag2_retrievers.judges.factory import make_judge
from sag2_retrievers.lexical import bm25_retrieve
from sag2_retrievers.results import RetrievalResult

QUESTIONS = Path(__file__).with_name("doc_folder_questions.json")
TOP_K = 10
BM25_TOP = 3
REFERENCE_JUDGE = "fake"  # the lexical cost alone: the engine's time with an instant judge


@dataclass(frozen=True)
class DocQuestion:
    """A question, the files that answer it (paths inside the folder) and the folder."""

    question: str
    answers: tuple[str, ...]
    folder: Path


class Identities:
    """A file's identity inside one folder: the digest of its bytes, so copies are one answer."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self._digests: dict[str, str] = {}

    def of(self, doc_id: str) -> str:
        """The digest of the file with this id, or the id itself if no such file is there."""
        if doc_id not in self._digests:
            path = self.folder / doc_id
            self._digests[doc_id] = (
                hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else doc_id
            )
        return self._digests[doc_id]

    def all_of(self, doc_ids: Sequence[str]) -> set[str]:
        """The identities of several files."""
        return {self.of(doc_id) for doc_id in doc_ids}


def load_questions(path: Path) -> tuple[list[DocQuestion], int]:
    """The questions with at least one answer file on this machine (answers cut to those), and
    the number skipped."""
    kept, skipped = [], 0
    for record in json.loads(path.read_text(encoding="utf-8")):
        folder = Path(record["folder"])
        answers = tuple(a for a in record["answers"] if (folder / a).is_file())
        if answers:
            kept.append(DocQuestion(record["question"], answers, folder))
        else:
            skipped += 1
    return kept, skipped


def built_index(
    folder: Path, index_dir: Path, options: Sequence[str] = ()
) -> tuple[Path, float | None]:
    """The folder's index file, built with `sag2 index` unless a previous run left it; the
    seconds the build took (None when reused)."""
    db = index_dir / f"{'_'.join(folder.parts[1:]) or 'root'}.sqlite"
    if db.exists():
        return db, None
    sag2 = str(Path(sys.executable).parent / "sag2")
    command = [sag2, "index", str(folder), "--db", str(db), "-q", "--skip-unreadable", *options]
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode:
        raise SystemExit(f"sag2 index {folder} failed:\n{done.stderr}")
    return db, time.perf_counter() - started


def engine_seconds(result: RetrievalResult) -> float:
    """The engine's own time for a retrieval: local and judge seconds over its rounds."""
    return sum(round_.local_seconds + round_.judge_seconds for round_ in result.trace)


def run_question(
    question: DocQuestion,
    index: SQLiteIndex,
    engines: dict[str, SAG2Engine],
    order: Sequence[str],
    identities: Identities,
) -> dict[str, Any]:
    """BM25 and each judge's SAG2 on one question: top 10 sources, found, dropped, seconds."""
    answers = identities.all_of(question.answers)
    bm25 = [hit.doc_id for hit in bm25_retrieve(index, question.question, TOP_K).hits]
    bm25_answers = identities.all_of(bm25[:BM25_TOP]) & answers
    row: dict[str, Any] = {
        "question": question.question,
        "folder": str(question.folder),
        "answers": list(question.answers),
        "bm25": {"top": bm25, "found": bool(identities.all_of(bm25) & answers)},
    }
    for name in order:
        result = engines[name].retrieve(question.question, top_k=TOP_K)
        top = [hit.doc_id for hit in result.hits]
        row[name] = {
            "top": top,
            "found": bool(identities.all_of(top) & answers),
            "dropped": bool(bm25_answers - identities.all_of(top)),
            "engine_seconds": engine_seconds(result),
        }
    return row


def run_folder(
    folder: Path,
    questions: Sequence[DocQuestion],
    db: Path,
    judges: Sequence[str],
    first_turn: int,
) -> list[dict[str, Any]]:
    """Every question of one folder, after one untimed warm-up retrieval per judge."""
    identities = Identities(folder)
    rows = []
    with SQLiteIndex(db, create=False) as index:
        engines = {name: SAG2Engine(index, make_judge(name)) for name in judges}
        try:
            for engine in engines.values():  # page cache and first-call set-up, not counted
                engine.retrieve(questions[0].question, top_k=TOP_K)
            for number, question in enumerate(questions, start=first_turn):
                turn = number % len(judges)
                order = [*judges[turn:], *judges[:turn]]
                rows.append(run_question(question, index, engines, order, identities))
        finally:
            for engine in engines.values():
                engine.close()
    return rows


def percentile(values: Sequence[float], share: float) -> float:
    """The nearest-rank percentile: the smallest value at least ``share`` of them do not
    exceed."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(share * len(ordered)) - 1)]


def summary(rows: Sequence[dict[str, Any]], judges: Sequence[str]) -> dict[str, Any]:
    """Per judge: R@10 of BM25 and SAG2, dropped questions, engine ms (median, p95), ratio."""
    count = len(rows)
    bm25 = 100 * sum(row["bm25"]["found"] for row in rows) / count
    judged: dict[str, Any] = {}
    for name in judges:
        seconds = [row[name]["engine_seconds"] for row in rows]
        dropped = [row["question"] for row in rows if row[name]["dropped"]]
        judged[name] = {
            "sag2_r10": 100 * sum(row[name]["found"] for row in rows) / count,
            "dropped": len(dropped),
            "dropped_percent": 100 * len(dropped) / count,
            "dropped_questions": dropped,
            "median_ms": 1000 * statistics.median(seconds),
            "p95_ms": 1000 * percentile(seconds, 0.95),
        }
    if REFERENCE_JUDGE in judged:
        reference = judged[REFERENCE_JUDGE]["median_ms"]
        for entry in judged.values():
            entry["median_vs_fake"] = entry["median_ms"] / reference
    return {"questions": count, "bm25_r10": bm25, "judges": judged}


def print_report(report: dict[str, Any]) -> None:
    """The markdown table for docs/benchmarks.md (all questions, then each folder's), its
    provenance, and the dropped questions."""
    print(f"Command: `{report['command']}`  ")
    print(f"{report['date']}, git {report['revision']}; {report['machine']}  ")
    for folder, built in report["folders"].items():
        seconds = built["index_seconds"]
        how = f"indexed in {seconds:.0f} s" if seconds is not None else "index reused"
        print(f"{folder}: {built['documents']:,} documents, {how}  ")
    totals = report["summary"]
    print(f"{totals['questions']} questions ({report['skipped']} skipped: no answer file here)\n")
    print(
        "| questions | judge | BM25 R@10 | SAG2 R@10 | BM25 top-3 answers dropped "
        "| engine ms/question, median | p95 | median vs fake |"
    )
    print("|---|---|---|---|---|---|---|---|")
    scopes = {"all": totals}
    if len(report["folders"]) > 1:  # with one folder, its rows would repeat the totals
        scopes.update({folder: built["summary"] for folder, built in report["folders"].items()})
    for scope, numbers in scopes.items():
        for name, entry in numbers["judges"].items():
            print(_table_row(f"{scope} ({numbers['questions']})", name, numbers["bm25_r10"], entry))
    for name, entry in totals["judges"].items():
        if entry["dropped_questions"]:
            print(f"\nDropped with {name}:")
            print("\n".join(f"- {question}" for question in entry["dropped_questions"]))


def _table_row(scope: str, judge: str, bm25_r10: float, entry: dict[str, Any]) -> str:
    """One judge's line of the table."""
    ratio = entry.get("median_vs_fake")
    return (
        f"| {scope} | {judge} | {bm25_r10:.1f} | {entry['sag2_r10']:.1f} "
        f"| {entry['dropped']} ({entry['dropped_percent']:.1f}%) | {entry['median_ms']:.0f} "
        f"| {entry['p95_ms']:.0f} | {f'{ratio:.2f}x' if ratio is not None else '-'} |"
    )


def main(argv: list[str] | None = None) -> int:
    """Index each folder once, run every question with BM25 and each judge, report."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--questions", type=Path, default=QUESTIONS)
    parser.add_argument("--judges", nargs="+", default=["local", REFERENCE_JUDGE])
    parser.add_argument("--index-dir", type=Path, help="keep (and reuse) the indexes here")
    parser.add_argument("--out", type=Path, help="write the report and every question's row")
    parser.add_argument(
        "--read-compressed",
        action="store_true",
        help="index .gz/.bz2/.xz files too (sag2 index --read-compressed)",
    )
    args = parser.parse_args(argv)
    questions, skipped = load_questions(args.questions)
    folders = sorted({question.folder for question in questions})
    report: dict[str, Any] = {
        "command": " ".join(
            ["python benchmarks/quality/doc_folder.py", *(sys.argv[1:] if argv is None else argv)]
        ),
        "date": str(date.today()),
        "revision": git_revision(),
        "machine": machine(),
        "skipped": skipped,
        "folders": {},
    }
    rows: list[dict[str, Any]] = []
    options = ["--read-compressed"] if args.read_compressed else []
    with tempfile.TemporaryDirectory() as scratch:
        index_dir = args.index_dir or Path(scratch)
        index_dir.mkdir(parents=True, exist_ok=True)
        for folder in folders:
            db, seconds = built_index(folder, index_dir, options)
            with SQLiteIndex(db, create=False) as index:
                documents = index.document_count()
            asked = [question for question in questions if question.folder == folder]
            answered = run_folder(folder, asked, db, args.judges, len(rows))
            report["folders"][str(folder)] = {
                "documents": documents,
                "index_seconds": seconds,
                "summary": summary(answered, args.judges),
            }
            rows += answered
    report["summary"] = summary(rows, args.judges)
    report["rows"] = rows
    print_report(report)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
