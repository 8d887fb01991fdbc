"""Whether analysis in worker processes pays on this machine: one ingest with, one without.

Run from the repository root::

    python benchmarks/speed/ingest_parallel.py --corpus DIR/corpus-100000.json [--repeats 3]

The corpus (a JSON list as `cli_index.py` writes it) is read into memory once per run, then
ingested into a fresh SQLite file in batches of 2,000 documents, once with the analysis in
worker processes (``parallel=True``) and once in the writer alone, alternately; the ingest
itself is timed in process. Prints the medians.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

from sag2_retrievers import SQLiteIndex
from sag2_retrievers.corpus_io import read_corpus

BATCH = 2_000


def ingest_seconds(corpus: Path, parallel: bool, folder: Path) -> float:
    """Seconds to ingest the corpus into a new index file, analysis parallel or not."""
    documents = list(read_corpus(corpus))
    batches = (documents[start : start + BATCH] for start in range(0, len(documents), BATCH))
    path = folder / f"ingest-{time.monotonic_ns()}.db"
    started = time.perf_counter()
    with SQLiteIndex(path) as index:
        index.ingest(batches, parallel=parallel)
    return time.perf_counter() - started


def main(argv: list[str] | None = None) -> int:
    """Time both ways alternately and print the medians."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--corpus", type=Path, required=True)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    runs: dict[str, list[float]] = {"workers": [], "writer alone": []}
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(args.repeats):
            runs["workers"].append(ingest_seconds(args.corpus, True, Path(tmp)))
            runs["writer alone"].append(ingest_seconds(args.corpus, False, Path(tmp)))
    for label, seconds in runs.items():
        listed = ", ".join(f"{s:.1f}" for s in seconds)
        print(f"analysis in {label}: median {statistics.median(seconds):.1f} s ({listed})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
