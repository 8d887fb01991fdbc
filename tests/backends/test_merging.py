"""Which segments a write merges: the smallest few, never more units than the bound."""

from __future__ import annotations

from pathlib import Path

import pytest

from sag2_retrievers import Document, SQLiteIndex
from sag2_retrievers.backends.merging import segments_to_merge
from sag2_retrievers.backends.sqlite import compaction


def test_nothing_is_merged_while_there_are_few_segments() -> None:
    assert segments_to_merge([(1, 10), (2, 10)], most=2, fan_in=8, max_units=100) == []


def test_the_smallest_segments_are_merged_up_to_the_fan_in() -> None:
    sizes = [(segment, 10) for segment in range(1, 12)]
    assert segments_to_merge(sizes, most=10, fan_in=8, max_units=1000) == list(range(1, 9))


def test_a_merge_stops_before_it_would_pass_the_unit_bound() -> None:
    """Past the bound a segment stays as it is, so a merge's memory does not grow with the
    index."""
    sizes = [(1, 40), (2, 50), (3, 60), (4, 70)]
    assert segments_to_merge(sizes, most=2, fan_in=8, max_units=100) == [1, 2]


def test_one_segment_alone_is_never_merged() -> None:
    sizes = [(1, 90), (2, 95), (3, 99)]
    assert segments_to_merge(sizes, most=2, fan_in=8, max_units=100) == []


def test_sqlite_ingest_merges_stay_within_the_bound(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With a bound of 5 units, many one-document writes leave no segment above it and
    rankings equal those of an index written in one batch."""
    monkeypatch.setattr(compaction, "MAX_SEGMENTS", 3)
    monkeypatch.setattr(compaction, "MAX_INGEST_MERGE_UNITS", 5)
    documents = [Document(f"d{n}", f"river {n} bank {n % 3} water") for n in range(30)]
    with SQLiteIndex(tmp_path / "small.db") as small, SQLiteIndex(tmp_path / "one.db") as one:
        for document in documents:
            small.add_documents([document], parallel=False)
        one.add_documents(documents, parallel=False)
        sizes = [
            len(units) // 8
            for (units,) in small._connection().execute("SELECT units FROM segments")
        ]
        assert max(sizes) <= 5 and len(sizes) < 30
        for question in ("river bank", "water 7", "bank 2"):
            assert small.search(question, 10) == one.search(question, 10)
    assert sum(sizes) == 30
