"""Puts benchmarks/ on the import path, so a script run by its path finds the shared helpers
(`_common`, `_judges`) and the scripts of the other groups."""

import sys
from pathlib import Path

BENCHMARKS = str(Path(__file__).resolve().parents[1])
if BENCHMARKS not in sys.path:
    sys.path.insert(0, BENCHMARKS)
