"""Regression tests for the third reliability round (issue 22): one test per defect found."""

from __future__ import annotations

import random
import sqlite3
import threading
import time
import tracemalloc
from pathlib import Path

import numpy as np
import pytest

from sag2_retrievers import SQLiteIndex
from sag2_retrievers.documents import Document
from sag2_retrievers.errors import IndexBusyError
from sag2_retrievers.judges._embeddings import DIMENSIONS, EmbeddingCache

# -- item 1: deleting a large document stays linear ---------------------------------------


_HAN = "北京大学是中国的一所位于城市历史文化研究学院图书馆教授学生国家政府经济发展"


def _han_text(chars: int, seed: int = 7) -> str:
    """Han sentences of random characters, about ``chars`` characters long."""
    rng = random.Random(seed)
    return "。".join("".join(rng.choices(_HAN, k=19)) for _ in range(chars // 20))


def _long_text(chars: int, seed: int = 7) -> str:
    """Latin sentences of random words, about ``chars`` characters long."""
    rng = random.Random(seed)
    words = [f"w{rng.randrange(5000)}" for _ in range(chars // 6)]
    return ". ".join(" ".join(words[i : i + 12]) for i in range(0, len(words), 12))


@pytest.mark.parametrize("operation", ["delete", "upsert"])
def test_replacing_a_large_document_needs_memory_linear_in_its_size(
    index_path: Path, operation: str
) -> None:
    """Defect 1: the delete path read the whole text once per unit (units x text bytes):
    400,000 characters in 2,200-character units peaked above 70 MB."""
    text = _long_text(400_000)
    with SQLiteIndex(index_path) as index:
        index.add_documents([Document("big", text)], parallel=False)
        tracemalloc.start()
        try:
            if operation == "delete":
                index.delete(["big"])
            else:
                index.add_documents([Document("big", "a short replacement")], parallel=False)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert peak < 25 * len(text), f"peak {peak:,} bytes for {len(text):,} characters"
        assert index.search("w17", 5) == []


# -- item 3: short write transactions, a clear busy error ---------------------------------


def _hold_write_lock(path: Path, seconds: float, holding: threading.Event) -> threading.Thread:
    """A thread holding the file's write lock (another process's writer) for a while."""

    def hold() -> None:
        connection = sqlite3.connect(path, isolation_level=None)
        connection.execute("BEGIN IMMEDIATE")
        holding.set()
        time.sleep(seconds)
        connection.execute("ROLLBACK")
        connection.close()

    thread = threading.Thread(target=hold)
    thread.start()
    holding.wait(10)
    return thread


def test_a_delete_analyses_before_it_takes_the_write_lock(index_path: Path) -> None:
    """Defect 3: the stored units were re-analysed inside the write transaction, so another
    writer waited for the whole analysis of the deleted document."""
    with SQLiteIndex(index_path) as index:
        index.add_documents([Document("big", _han_text(200_000))], parallel=False)
        index.add_documents([Document("small", "alpha bravo")], parallel=False)
        longest_busy = 0.0
        done = threading.Event()

        def writer_waits() -> None:
            nonlocal longest_busy
            probe = sqlite3.connect(index_path, isolation_level=None, timeout=0)
            while not done.is_set():
                started = time.perf_counter()
                while True:
                    try:
                        probe.execute("BEGIN IMMEDIATE")
                        probe.execute("ROLLBACK")
                        break
                    except sqlite3.OperationalError:
                        time.sleep(0.0005)
                longest_busy = max(longest_busy, time.perf_counter() - started)
            probe.close()

        watcher = threading.Thread(target=writer_waits)
        started = time.perf_counter()
        watcher.start()
        index.delete(["big"])
        elapsed = time.perf_counter() - started
        done.set()
        watcher.join()
        assert longest_busy < elapsed / 3, (longest_busy, elapsed)


def test_a_writer_blocked_by_another_process_says_busy(
    index_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Defect 3: a writer that waited out the busy timeout got a raw 'database is locked'."""
    monkeypatch.setattr("sag2_retrievers._sqlite.BUSY_TIMEOUT_SECONDS", 0.2)
    with SQLiteIndex(index_path) as index:
        index.add_documents([Document("a", "alpha bravo")], parallel=False)
        holding = threading.Event()
        holder = _hold_write_lock(index_path, 1.5, holding)
        try:
            with pytest.raises(IndexBusyError, match="busy: another process is writing"):
                index.add_documents([Document("b", "charlie delta")], parallel=False)
            with pytest.raises(IndexBusyError, match="busy: another process is writing"):
                index.delete(["a"])
        finally:
            holder.join()
        assert index.document_count() == 1


def test_opening_an_index_for_search_does_not_wait_for_a_writer(
    index_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Defect 3: opening an existing index took the write lock, so it failed after the busy
    timeout with "is not a SAG2 index or cannot be opened (database is locked)"."""
    with SQLiteIndex(index_path) as index:
        index.add_documents([Document("a", "alpha bravo")], parallel=False)
    monkeypatch.setattr("sag2_retrievers._sqlite.BUSY_TIMEOUT_SECONDS", 0.2)
    holding = threading.Event()
    holder = _hold_write_lock(index_path, 1.5, holding)
    try:
        with SQLiteIndex(index_path, create=False) as index:
            assert [hit.doc_id for hit in index.search("alpha", 3)] == ["a"]
    finally:
        holder.join()


def test_an_embedding_cache_write_never_fails_a_query(
    index_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Defect 3: a local judge caching embeddings in the index file waited out the busy
    timeout, then raised a JudgeError, while another process was writing the file; now the
    write is skipped after a short wait, with a warning."""
    with SQLiteIndex(index_path) as index:
        index.add_documents([Document("a", "alpha bravo")], parallel=False)
    vector = np.ones(DIMENSIONS, dtype=np.float32)
    before = EmbeddingCache("model", index_path)
    before.put_many({"warm": vector})
    holding = threading.Event()
    holder = _hold_write_lock(index_path, 5.0, holding)
    try:
        started = time.perf_counter()
        before.put_many({"new": vector})
        assert time.perf_counter() - started < 3.0
        assert set(before.get_many(["warm", "new"])) == {"warm", "new"}
        assert "busy: another process is writing" in caplog.text
    finally:
        holder.join()
    before.close()


def test_a_new_embedding_cache_table_is_kept_in_memory_while_another_process_writes(
    index_path: Path,
) -> None:
    """Defect 3: creating the cache table needs the write lock; busy, the cache stays in memory."""
    with SQLiteIndex(index_path) as index:
        index.add_documents([Document("a", "alpha bravo")], parallel=False)
    holding = threading.Event()
    holder = _hold_write_lock(index_path, 5.0, holding)
    try:
        started = time.perf_counter()
        cache = EmbeddingCache("model", index_path)
        assert time.perf_counter() - started < 3.0
        cache.put_many({"new": np.ones(DIMENSIONS, dtype=np.float32)})
        assert list(cache.get_many(["new"])) == ["new"]
    finally:
        holder.join()
    cache.close()
