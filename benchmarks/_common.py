"""Shared helpers for the benchmarks: data paths, machine description, timing, reports."""

from __future__ import annotations

import os
import platform
import sqlite3
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

SHARED_DATA = Path(
    os.environ.get("SAG2_SHARED_DATA", Path(__file__).parents[2] / "shared" / "data")
)
KAG_QUESTIONS = SHARED_DATA / "musique" / "kag_musique_qa_100_hipporag_subset.json"
TRAIN_QUESTIONS = SHARED_DATA / "musique" / "hipporag_musique_train_fixture.json"
TRAIN_CORPUS = SHARED_DATA / "musique" / "hipporag_musique_train_fixture_corpus.json"


def machine() -> str:
    """A one-line description of the machine and software versions."""
    cpu = "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return (
        f"{os.cpu_count()} cores ({cpu}), Python {platform.python_version()}, "
        f"SQLite {sqlite3.sqlite_version}, {platform.system()} {platform.release()}"
    )


def git_revision() -> str:
    """The current commit, for the record."""
    try:
        return subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


@contextmanager
def stopwatch() -> Iterator[list[float]]:
    """Measure wall time of a block; the elapsed seconds land in the yielded list."""
    box: list[float] = []
    started = time.perf_counter()
    yield box
    box.append(time.perf_counter() - started)
