"""`import langchain_sag2` timed side by side from two checkouts, whole processes interleaved.

    python benchmarks/speed/import_time.py BEFORE_CHECKOUT AFTER_CHECKOUT [--runs 15]

Each run is a fresh interpreter whose PYTHONPATH puts that checkout's core and LangChain
adapter first (and checks it imported from there); the two alternate, so machine load falls
on both alike. Reported: median and fastest seconds per checkout.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

IMPORT = "import langchain_sag2, sys; assert langchain_sag2.__file__.startswith(sys.argv[1])"


def import_seconds(checkout: Path) -> float:
    """Wall seconds of one interpreter importing langchain_sag2 from ``checkout``."""
    path = f"{checkout}{os.pathsep}{checkout / 'integrations' / 'langchain-sag2'}"
    started = time.perf_counter()
    subprocess.run(
        [sys.executable, "-c", IMPORT, str(checkout)],
        check=True,
        env={**os.environ, "PYTHONPATH": path},
    )
    return time.perf_counter() - started


def main(argv: list[str] | None = None) -> int:
    """Time both checkouts in turn and print each one's median and fastest run."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("before", type=Path)
    parser.add_argument("after", type=Path)
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args(argv)
    checkouts = {"before": args.before.resolve(), "after": args.after.resolve()}
    seconds: dict[str, list[float]] = {name: [] for name in checkouts}
    for _ in range(args.runs):
        for name, checkout in checkouts.items():
            seconds[name].append(import_seconds(checkout))
    for name, values in seconds.items():
        print(f"{name}: median {statistics.median(values):.3f} s, fastest {min(values):.3f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
