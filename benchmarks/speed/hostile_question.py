"""Peak memory and time of `sag2 query` on one hostile 100,000-character question.

    python benchmarks/speed/hostile_question.py [--documents 3000]

The question holds ~14,000 distinct short words (just under the 100,000-character limit),
the attack issue 32 reproduced against the previous offline judge (2.04 GB, 10.6 s). The
index is built from the shared MuSiQue corpora topped up with synthetic passages; the query
runs as a whole process with the default offline judge, and its peak resident set is read
from the kernel's accounting of the finished child. Targets: <= 600 MB, <= 15 s.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from datetime import date
from pathlib import Path

import _here  # noqa: F401 - puts benchmarks/ on the import path
from _common import git_revision, machine
from engine_local_time import build

QUESTION_CHARS = 99_990
KEY_VARIABLES = ("OPENROUTER_API_KEY", "TYPESAFE_API_KEY")


def hostile_question(texts: list[str]) -> str:
    """The corpus's own distinct words (so BM25 and the judge have work), then made-up short
    words, up to just under the question limit."""
    seen = dict.fromkeys(w for text in texts for w in text.split() if w.isalpha())
    words, size = [], 0
    made_up = (f"q{n:x}z" for n in range(10**6))
    for word in [*seen, *made_up]:
        if size + len(word) + 1 > QUESTION_CHARS:
            break
        words.append(word)
        size += len(word) + 1
    return " ".join(words)


def main(argv: list[str] | None = None) -> int:
    """Build the index, run one query as a child process, print time and peak memory."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--documents", type=int, default=3_000)
    args = parser.parse_args(argv)
    env = {k: v for k, v in os.environ.items() if k not in KEY_VARIABLES}
    with tempfile.TemporaryDirectory() as scratch:
        db = Path(scratch) / "hostile.db"
        index, size = build(db, args.documents)
        texts = [unit.body for unit in index.units(range(1, 400)).values()]
        index.close()
        question = hostile_question(texts)
        command = [sys.executable, "-m", "sag2_retrievers.cli", "query", "--db", str(db)]
        started = time.perf_counter()
        done = subprocess.run(
            [*command, question], capture_output=True, text=True, env=env, check=False
        )
        seconds = time.perf_counter() - started
    peak_mib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    print(f"Run {date.today()} on {machine()}, commit {git_revision()}.\n")
    judged = done.stdout.count("\n")
    print("| index passages | question chars | distinct words | exit | wall s | peak RSS MiB |")
    print("|---:|---:|---:|---:|---:|---:|")
    print(
        f"| {size:,} | {len(question):,} | {len(set(question.split())):,} | "
        f"{done.returncode} | {seconds:.1f} | {peak_mib:.0f} |"
    )
    print(f"\n{judged} lines of output; last: {done.stdout.strip().splitlines()[-1:]}")
    if done.returncode != 0:
        print(done.stderr.strip()[-500:])
    return 0


if __name__ == "__main__":
    sys.exit(main())
