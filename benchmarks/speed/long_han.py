"""Time very long Han text: ingest of one large document, and the longest allowed question.

Run from the repository root: ``python benchmarks/speed/long_han.py``. Han text goes through jieba,
whose cost grows with the text, so both must stay proportionate: ingest in characters per
second at two sizes (a quadratic cost would halve the rate when the size doubles), and a
question at the 100,000-character limit, of which only the first 4,000 are analysed.
"""

from __future__ import annotations

import sys
import tempfile
import time
from datetime import date
from pathlib import Path

import _here  # noqa: F401 - puts benchmarks/ on the import path
from _common import git_revision, machine

from sag2_retrievers import Document, SAG2Engine, SQLiteIndex
from sag2_retrievers.analysis import tokenize
from sag2_retrievers.judges import OverlapJudge
from sag2_retrievers.query import MAX_QUESTION_CHARS

SIZES = (350_000, 700_000)  # characters; 700,000 Han characters are 2.1 MB of UTF-8


def ingest_seconds(directory: Path, characters: int) -> float:
    """Seconds to add one document of ``characters`` Han characters (parallel analysis)."""
    text = ("北京大学是中国的一所大学位于北京" * (characters // 16 + 1))[:characters]
    with SQLiteIndex(directory / f"han-{characters}.sqlite") as index:
        started = time.perf_counter()
        index.add_documents([Document("han", text)])
        return time.perf_counter() - started


def question_seconds(directory: Path) -> tuple[float, float]:
    """Seconds for search and for a whole retrieval with a question at the length limit."""
    question = "北京" * (MAX_QUESTION_CHARS // 2)
    with SQLiteIndex(directory / "questions.sqlite") as index:
        index.add_documents(
            [Document("pku", "北京大学是中国的一所大学，位于北京。"), Document("o", "Oxford.")],
            parallel=False,
        )
        started = time.perf_counter()
        index.search(question)
        search = time.perf_counter() - started
        engine = SAG2Engine(index, OverlapJudge())
        started = time.perf_counter()
        engine.retrieve(question)
        retrieve = time.perf_counter() - started
        engine.close()
    return search, retrieve


def main() -> int:
    """Print a Markdown table of the timings."""
    tokenize("北京")  # load jieba's dictionary outside the timings
    print(f"Run {date.today()} on {machine()}, commit {git_revision()}.\n")
    print("| case | characters | seconds | characters per second |")
    print("|---|---:|---:|---:|")
    with tempfile.TemporaryDirectory() as tmp:
        for size in SIZES:
            seconds = ingest_seconds(Path(tmp), size)
            print(f"| ingest one Han document | {size:,} | {seconds:.2f} | {size / seconds:,.0f} |")
        search, retrieve = question_seconds(Path(tmp))
    print(f"| search, question at the limit | {MAX_QUESTION_CHARS:,} | {search:.3f} | |")
    print(f"| retrieve, same question | {MAX_QUESTION_CHARS:,} | {retrieve:.3f} | |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
