"""Peak memory and write-lock hold of deleting one large Han document.

Run from the repository root:
``python benchmarks/faults_scale/delete_memory.py [--sizes 1000000 ...]``.
For each size, one process builds an index holding one document of that many Han characters
(``parallel=False``); a fresh process then opens it, loads jieba, and deletes the document
while a thread on its own connection tries ``BEGIN IMMEDIATE`` without waiting, over and over,
recording the longest run of refusals: how long another writer was shut out. The delete
process reports its peak resident memory (``ru_maxrss``) and its resident memory just before
the delete. ``--library DIR`` runs the delete with the package found in DIR instead (an
export of an older commit, for a side-by-side comparison).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from datetime import date
from pathlib import Path

import _here  # noqa: F401 - puts benchmarks/ on the import path
from _common import git_revision, machine

HEADER = (
    "| characters | delete s | write lock held s | RSS before MB | peak RSS MB | peak - before MB |"
)
_HAN = "北京大学是中国的一所位于城市历史文化研究学院图书馆教授学生国家政府经济发展"

_BUILD = """
import random, sys
from sag2_retrievers import Document, SQLiteIndex
chars, path = int(sys.argv[1]), sys.argv[2]
rng = random.Random(7)
text = "。".join("".join(rng.choices({han!r}, k=19)) for _ in range(chars // 20))
with SQLiteIndex(path) as index:
    index.add_documents([Document("big", text)], parallel=False)
"""

_DELETE = """
import json, resource, sqlite3, sys, threading, time
from sag2_retrievers import SQLiteIndex
from sag2_retrievers.analysis import tokenize

def rss_mb():
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024

path = sys.argv[1]
tokenize("北京大学")
longest, done = [0.0], threading.Event()

def shut_out():
    probe = sqlite3.connect(path, isolation_level=None, timeout=0)
    while not done.is_set():
        started = time.perf_counter()
        while not done.is_set():
            try:
                probe.execute("BEGIN IMMEDIATE")
                probe.execute("ROLLBACK")
                break
            except sqlite3.OperationalError:
                time.sleep(0.001)
        longest[0] = max(longest[0], time.perf_counter() - started)
        time.sleep(0.001)
    probe.close()

with SQLiteIndex(path, create=False) as index:
    before = rss_mb()
    watcher = threading.Thread(target=shut_out)
    watcher.start()
    started = time.perf_counter()
    removed = index.delete(["big"])
    seconds = time.perf_counter() - started
    done.set()
    watcher.join()
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps({{"removed": removed, "seconds": seconds, "lock_hold": longest[0],
                  "rss_before_mb": before, "peak_mb": peak}}))
"""


def run(script: str, arguments: list[str], library: Path | None) -> str:
    """Run a script in a fresh interpreter (with ``library`` first on its path); its stdout."""
    environment = dict(os.environ)
    if library is not None:
        environment["PYTHONPATH"] = str(library)
    done = subprocess.run(
        [sys.executable, "-c", script, *arguments],
        cwd=library,  # ``-c`` puts the working folder first on the path
        env=environment,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"failed ({done.returncode}):\n{done.stderr[-2000:]}")
    return done.stdout


def measure(chars: int, library: Path | None) -> dict[str, float]:
    """Build an index of one ``chars``-character document, then delete it; the figures."""
    with tempfile.TemporaryDirectory() as folder:
        path = str(Path(folder) / "big.sqlite")
        run(_BUILD.format(han=_HAN), [str(chars), path], None)
        figures: dict[str, float] = json.loads(run(_DELETE.format(), [path], library))
        return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000_000, 5_000_000])
    parser.add_argument("--library", type=Path, default=None)
    arguments = parser.parse_args()
    print(f"Run {date.today()} on {machine()}, commit {git_revision()}")
    if arguments.library is not None:
        print(f"delete with the package in {arguments.library}")
    print(HEADER)
    print("|---:|---:|---:|---:|---:|---:|")
    for chars in arguments.sizes:
        figures = measure(chars, arguments.library)
        extra = figures["peak_mb"] - figures["rss_before_mb"]
        print(
            f"| {chars:,} | {figures['seconds']:.1f} | {figures['lock_hold']:.2f} | "
            f"{figures['rss_before_mb']:.0f} | {figures['peak_mb']:.0f} | {extra:.0f} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
