"""`sag2 index DIR` over folders no one prepared: a system's package documentation and a Python
installation's library. Reports files, documents, files skipped by reason, warnings, seconds,
peak resident memory of the indexing process and the index size, once as `sag2 index` reads
by default and once with ``--read-compressed``.

    python benchmarks/speed/folder_index.py [FOLDER ...] [--out FILE.json]

Folders default to /usr/share/doc and /usr/lib/python3.11 (those that exist). Each run is a
whole `sag2 index` process into a fresh file (--skip-unreadable, so a folder with a few files
in another encoding still finishes); its summary line gives the counts, its stderr the
warnings, and GNU time (/usr/bin/time) the process's peak RSS.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import time
from datetime import date
from pathlib import Path
from typing import Any

import _here  # noqa: F401 - puts benchmarks/ on the import path
from _common import git_revision, machine

FOLDERS = (Path("/usr/share/doc"), Path("/usr/lib/python3.11"))
TIME = "/usr/bin/time"
RSS_MARK = "peak-rss-kib="
_SUMMARY = re.compile(
    r"holds (?P<documents>\d[\d,]*) documents.*?(?P<bytes>\d[\d,]*) bytes; "
    r"(?P<read>\d[\d,]*) files read(?: \((?P<as_text>\d[\d,]*) \.json as text\))?, "
    r"(?P<skipped>\d[\d,]*) skipped"
    r"(?: \((?P<reasons>.*)\))?$"
)
_REASON = re.compile(r"(\d[\d,]*) ([^,]+(?:\([^)]*\))?)")


def count(text: str | None) -> int:
    """A number as the summary prints it (1,234)."""
    return int(text.replace(",", "")) if text else 0


def index_folder(folder: Path, db: Path, options: list[str]) -> dict[str, Any]:
    """Run `sag2 index` once; its counts, warnings, seconds and peak RSS."""
    sag2 = str(Path(sys.executable).parent / "sag2")
    command = [sag2, "index", str(folder), "--db", str(db), "-q", "--skip-unreadable", *options]
    started = time.perf_counter()
    # GNU time reports the one child's peak RSS (getrusage would give the largest child's).
    done = subprocess.run(
        [TIME, "-f", f"{RSS_MARK}%M", *command], capture_output=True, text=True, check=False
    )
    seconds = time.perf_counter() - started
    peak_kib = next(
        int(line.removeprefix(RSS_MARK))
        for line in reversed(done.stderr.splitlines())
        if line.startswith(RSS_MARK)
    )
    if done.returncode:
        raise SystemExit(f"{' '.join(command)} failed:\n{done.stderr}")
    summary = _SUMMARY.search(done.stdout.strip().splitlines()[-1])
    if summary is None:
        raise SystemExit(f"unexpected summary: {done.stdout}")
    reasons = {
        why.strip(): count(number) for number, why in _REASON.findall(summary["reasons"] or "")
    }
    warnings = [line for line in done.stderr.splitlines() if ": warning: " in line]
    return {
        "options": options,
        "files_read": count(summary["read"]),
        "json_as_text": count(summary["as_text"]),
        "documents": count(summary["documents"]),
        "skipped": count(summary["skipped"]),
        "skipped_by_reason": reasons,
        "warnings": len(warnings),
        "warning_lines": warnings[:20],
        "seconds": seconds,
        "peak_rss_mib": peak_kib / 1024,
        "db_bytes": db.stat().st_size,
    }


def main(argv: list[str] | None = None) -> int:
    """Index each folder both ways and print a markdown table (and JSON with --out)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folders", nargs="*", type=Path)
    parser.add_argument("--out", type=Path, help="write every run's numbers as JSON")
    args = parser.parse_args(argv)
    folders = [folder for folder in (args.folders or FOLDERS) if folder.is_dir()]
    runs = []
    with tempfile.TemporaryDirectory(prefix="sag2-folders-") as scratch:
        for folder in folders:
            for options in ([], ["--read-compressed"]):
                db = Path(scratch) / f"{len(runs)}.sqlite"
                runs.append({"folder": str(folder), **index_folder(folder, db, options)})
                db.unlink()
    print(f"{date.today()}, git {git_revision()}; {machine()}\n")
    print(
        "| folder | options | files read | documents | skipped (by reason) | warnings | s "
        "| peak RSS MiB | index MB |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for run in runs:
        reasons = ", ".join(f"{n:,} {why}" for why, n in run["skipped_by_reason"].items())
        print(
            f"| {run['folder']} | {' '.join(run['options']) or 'default'} "
            f"| {run['files_read']:,} | {run['documents']:,} | {run['skipped']:,} ({reasons}) "
            f"| {run['warnings']} | {run['seconds']:.0f} | {run['peak_rss_mib']:.0f} "
            f"| {run['db_bytes'] / 1e6:.1f} |"
        )
    for run in runs:
        for line in run["warning_lines"]:
            print(f"\n{run['folder']} {' '.join(run['options'])}: {line}")
    if args.out:
        args.out.write_text(json.dumps(runs, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
