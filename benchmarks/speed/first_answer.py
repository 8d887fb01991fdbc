"""Time from ``sag2 index`` to the first ``sag2 query`` answer, each as a whole process.

    python benchmarks/speed/first_answer.py [--repeats 3] [--judges local fake]

The corpus is the MuSiQue train fixture (1,890 passages); the question is its first. For
each judge, a fresh index is built and queried once, as a user would from the shell, and the
two commands' wall times are added; the judges take turns within each repeat, so machine
load shifts all of them alike. Reported: the median per judge and its ratio to ``--judge
fake`` (the lexical cost alone), the figure issue 24 bounds by 1.5.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import date
from pathlib import Path

import _here  # noqa: F401 - puts benchmarks/ on the import path
from _common import TRAIN_CORPUS, TRAIN_QUESTIONS, git_revision, machine

from sag2_retrievers.eval import load_questions

KEY_VARIABLES = ("OPENROUTER_API_KEY", "TYPESAFE_API_KEY")


def timed(command: list[str], env: dict[str, str]) -> float:
    """Run a command to completion (failing loudly) and return its wall time."""
    started = time.perf_counter()
    subprocess.run(command, check=True, env=env, stdout=subprocess.DEVNULL)
    return time.perf_counter() - started


def first_answer(judge: str, question: str, workdir: Path, env: dict[str, str]) -> float:
    """Seconds for ``sag2 index`` of the corpus into a new file plus one ``sag2 query``."""
    db = workdir / f"{judge}-{time.monotonic_ns()}.sqlite"
    sag2 = [str(Path(sys.executable).parent / "sag2")]  # the installed command itself
    index = timed([*sag2, "index", str(TRAIN_CORPUS), "--db", str(db), "-q"], env)
    query = timed([*sag2, "query", "--db", str(db), "--judge", judge, question], env)
    return index + query


def main(argv: list[str] | None = None) -> int:
    """Time every judge ``--repeats`` times, interleaved, and print the medians and ratios."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--judges", nargs="+", default=["fake", "local"])
    args = parser.parse_args(argv)
    env = {k: v for k, v in os.environ.items() if k not in KEY_VARIABLES}
    question = load_questions(TRAIN_QUESTIONS)[0].question
    judges = ["fake", *(j for j in args.judges if j != "fake")]
    times: dict[str, list[float]] = {j: [] for j in judges}
    with tempfile.TemporaryDirectory() as folder:
        for _ in range(args.repeats):
            for judge in judges:
                times[judge].append(first_answer(judge, question, Path(folder), env))
    print(f"Run {date.today()} on {machine()}, commit {git_revision()}.\n")
    print("| judge | index + first query, median s | runs | ratio to fake |\n|---|---:|---|---:|")
    fake = statistics.median(times["fake"])
    for judge in judges:
        median = statistics.median(times[judge])
        runs = ", ".join(f"{t:.2f}" for t in times[judge])
        print(f"| {judge} | {median:.2f} | {runs} | {median / fake:.2f}x |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
