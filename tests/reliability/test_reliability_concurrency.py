"""Concurrent readers and writers across threads and processes, and a writer killed mid-ingest.

Every batch's documents share a marker word, so a reader can count each batch it sees: a
count other than 0 or the batch size is a torn read. Child processes use the "spawn" start
method, so they share nothing with the test process but the index file.
"""

from __future__ import annotations

import itertools
import linecache
import multiprocessing
import signal
import sqlite3
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from multiprocessing.connection import Connection
from multiprocessing.synchronize import Event
from pathlib import Path
from types import FrameType
from typing import Any

import pytest

from sag2_retrievers import Document, RetrievalResult, SAG2Engine, SQLiteIndex
from sag2_retrievers.backends.sqlite import writing as writing_module
from sag2_retrievers.backends.sqlite.fts import or_expression
from sag2_retrievers.backends.sqlite.schema import SEARCH_SQL
from sag2_retrievers.judges import OverlapJudge

BATCH_SIZE = 5
STABLE_BATCHES = 6
JOIN_SECONDS = 60.0
SPAWN = multiprocessing.get_context("spawn")


def batch(prefix: str, number: int, version: int = 0, size: int = BATCH_SIZE) -> list[Document]:
    """One batch: ids ``{prefix}{number}-{n}``, all holding the marker word and a batch word."""
    return [
        Document(
            f"{prefix}{number}-{n}",
            f"The marker stone number {n} of batch{number} was carved in version {version}.",
            f"Stone {prefix}{number} {n}",
        )
        for n in range(size)
    ]


def counts_per_batch(index: SQLiteIndex) -> Counter[str]:
    """How many documents of each batch a marker search returns."""
    return Counter(hit.doc_id.split("-")[0] for hit in index.search("marker", limit=100_000))


def torn(counts: Counter[str]) -> list[str]:
    """Batches seen partly (neither none nor all of their documents)."""
    return [name for name, count in counts.items() if count != BATCH_SIZE]


def read_until_stopped(path: str, stop: Event, results: Any) -> None:
    """A reader process: search until told to stop, then report reads, torn reads and errors."""
    reads, torn_reads, errors = 0, [], []
    try:
        with SQLiteIndex(path) as index:
            while True:
                torn_reads.extend(torn(counts_per_batch(index)))
                reads += 1
                if reads == 1:
                    results.put(("ready", 0, [], []))
                if stop.is_set():
                    break
    except Exception as error:
        errors.append(repr(error))
    results.put(("done", reads, torn_reads, errors))


def write_batches(path: str, prefix: str, count: int, results: Any) -> None:
    """A writer process: add ``count`` batches, one transaction each, then report errors."""
    errors = []
    try:
        with SQLiteIndex(path) as index:
            for number in range(count):
                index.add_documents(batch(prefix, number), parallel=False)
    except Exception as error:
        errors.append(repr(error))
    results.put(("written", count, [], errors))


def ingest_until_killed(
    path: str, committed: Connection, size: int, stall: int | None, pipelined: bool
) -> None:
    """A writer process that adds batches forever, sending each batch number after its commit.

    ``pipelined`` feeds an endless stream of batches to one ``ingest`` call (which reads batch
    k+1 before writing batch k); otherwise each batch is one ``add_documents`` call. With
    ``stall``, it stops inside batch ``stall``'s transaction, after writing part of it, sends
    -1, and waits there to be killed.
    """
    if stall is not None:
        stall_inside_batch(committed, stall)
    with SQLiteIndex(path) as index:
        if pipelined:
            numbers = itertools.count()
            index.ingest(
                (batch("k", number, size=size) for number in itertools.count()),
                parallel=False,
                on_batch=lambda _: committed.send(next(numbers)),
            )
        else:
            for number in itertools.count():
                index.add_documents(batch("k", number, size=size), parallel=False)
                committed.send(number)


def stall_inside_batch(committed: Connection, stall: int) -> None:
    """Make batch ``stall`` announce itself and hang once its rows are written, inside its
    transaction (before the postings and the commit)."""
    insert_documents = writing_module._insert_documents

    def insert_or_hang(
        connection: sqlite3.Connection, documents: Sequence[Document], items: Any
    ) -> list[int]:
        """Insert as usual, but hang (after announcing it) inside the chosen batch."""
        written = insert_documents(connection, documents, items)
        if any(document.id.startswith(f"k{stall}-") for document in documents):
            committed.send(-1)
            time.sleep(JOIN_SECONDS)
        return written

    writing_module._insert_documents = insert_or_hang


@pytest.fixture
def index(index_path: Path) -> Iterator[SQLiteIndex]:
    """An index holding the stable batches s0..s5, which writers upsert but never delete."""
    with SQLiteIndex(index_path) as opened:
        for number in range(STABLE_BATCHES):
            opened.add_documents(batch("s", number), parallel=False)
        yield opened


class ThreadReader:
    """Searches in a thread until stopped, keeping torn reads and errors."""

    def __init__(self, index: SQLiteIndex, stop: threading.Event) -> None:
        self.reads = 0
        self.torn: list[str] = []
        self.errors: list[str] = []
        self._index, self._stop = index, stop
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        """Read until stopped."""
        try:
            while not self._stop.is_set():
                self.torn.extend(torn(counts_per_batch(self._index)))
                self.reads += 1
        except Exception as error:
            self.errors.append(repr(error))


def start_processes(count: int, target: Callable[..., None], *args: Any) -> list[Any]:
    """Start ``count`` spawned processes running target(*args)."""
    processes = [SPAWN.Process(target=target, args=args, daemon=True) for _ in range(count)]
    for process in processes:
        process.start()
    return processes


def collect(results: Any, kind: str, count: int) -> list[tuple[str, int, list[str], list[str]]]:
    """Wait for ``count`` reports of one kind from child processes."""
    reports: list[tuple[str, int, list[str], list[str]]] = []
    while len(reports) < count:
        report = results.get(timeout=JOIN_SECONDS)
        if report[0] == kind:
            reports.append(report)
    return reports


# -- readers and writers ---------------------------------------------------------------------


def test_readers_in_threads_and_processes_never_see_half_a_batch_while_a_writer_works(
    index: SQLiteIndex,
) -> None:
    results = SPAWN.Queue()
    stop = SPAWN.Event()
    processes = start_processes(2, read_until_stopped, str(index.path), stop, results)
    collect(results, "ready", 2)
    thread_stop = threading.Event()
    readers = [ThreadReader(index, thread_stop) for _ in range(2)]
    for number in range(30):
        index.add_documents(batch("w", number), parallel=False)
        index.add_documents(batch("s", number % STABLE_BATCHES, version=number), parallel=False)
        if number % 3 == 2:
            index.delete(doc.id for doc in batch("w", number - 2))
    stop.set()
    thread_stop.set()
    reports = collect(results, "done", 2)
    for process in processes:
        process.join(JOIN_SECONDS)
    for reader in readers:
        reader.thread.join(JOIN_SECONDS)
    assert [r[3] for r in reports] == [[], []] and [r.errors for r in readers] == [[], []]
    assert [r[2] for r in reports] == [[], []] and [r.torn for r in readers] == [[], []]
    assert all(r[1] > 3 for r in reports) and all(r.reads > 3 for r in readers)
    expected = {f"s{n}" for n in range(STABLE_BATCHES)} | {f"w{n}" for n in range(30) if n % 3}
    assert set(counts_per_batch(index)) == expected and torn(counts_per_batch(index)) == []


def test_two_writer_processes_and_a_thread_writer_never_hit_database_is_locked(
    index: SQLiteIndex,
) -> None:
    results = SPAWN.Queue()
    processes = [
        SPAWN.Process(target=write_batches, args=(str(index.path), prefix, 20, results))
        for prefix in ("p", "q")
    ]
    for process in processes:
        process.start()
    for number in range(20):
        index.add_documents(batch("t", number), parallel=False)
    reports = collect(results, "written", 2)
    for process in processes:
        process.join(JOIN_SECONDS)
    assert [report[3] for report in reports] == [[], []]
    counts = counts_per_batch(index)
    assert torn(counts) == []
    assert {name[0] for name in counts} == {"s", "p", "q", "t"} and len(counts) == 66


# -- one consistent snapshot per read --------------------------------------------------------


def upsert_from_another_thread(index: SQLiteIndex, number: int) -> None:
    """Replace a stable batch (new unit ids) in a separate thread, with its own connection,
    and check that the replacement committed."""
    errors: list[BaseException] = []

    def upsert() -> None:
        """Upsert the batch, keeping any error for the caller."""
        try:
            index.add_documents(batch("s", number, version=99), parallel=False)
        except BaseException as error:
            errors.append(error)

    writer = threading.Thread(target=upsert)
    writer.start()
    writer.join(JOIN_SECONDS)
    assert not writer.is_alive() and errors == []


def batch_was_replaced(index: SQLiteIndex, number: int) -> bool:
    """Whether batch ``number`` now holds its version-99 text (read by a fresh connection)."""
    with sqlite3.connect(index.path) as connection:
        texts = connection.execute(
            "SELECT text FROM documents WHERE doc_id LIKE ?", (f"s{number}-%",)
        ).fetchall()
    return len(texts) == BATCH_SIZE and all("version 99" in text for (text,) in texts)


def test_search_reads_one_snapshot_while_a_batch_is_upserted(
    index: SQLiteIndex, monkeypatch: pytest.MonkeyPatch
) -> None:
    rank_expression = index.rank_expression
    ranked_ids: list[int] = []

    def rank_then_upsert(*args: Any, **kwargs: Any) -> list[tuple[int, float]]:
        """Rank, then let a writer replace batch s2 before the caller reads on."""
        ranked = rank_expression(*args, **kwargs)
        ranked_ids.extend(unit_id for unit_id, _ in ranked)
        upsert_from_another_thread(index, 2)
        return ranked

    monkeypatch.setattr(index, "rank_expression", rank_then_upsert)
    hits = index.search("marker", limit=100_000)
    assert ranked_ids and batch_was_replaced(index, 2)
    assert [hit.unit_id for hit in hits] == ranked_ids
    assert Counter(hit.doc_id.split("-")[0] for hit in hits) == Counter(
        {f"s{n}": BATCH_SIZE for n in range(STABLE_BATCHES)}
    )
    assert all("version 0" in hit.text for hit in hits)


def test_retrieval_survives_an_upsert_between_ranking_and_fetching_units(
    index: SQLiteIndex, monkeypatch: pytest.MonkeyPatch
) -> None:
    rank_expression = index.rank_expression
    calls: list[int] = []

    def rank_then_upsert(*args: Any, **kwargs: Any) -> list[tuple[int, float]]:
        """Rank, then (the first time only) let a writer replace batch s2."""
        ranked = rank_expression(*args, **kwargs)
        if not calls:
            calls.append(1)
            upsert_from_another_thread(index, 2)
        return ranked

    monkeypatch.setattr(index, "rank_expression", rank_then_upsert)
    engine = SAG2Engine(index, OverlapJudge())
    try:
        result = engine.retrieve("marker stone batch2", top_k=50)
    finally:
        engine.close()
    assert calls and batch_was_replaced(index, 2)
    assert isinstance(result, RetrievalResult) and result.hits
    current = index.units(unit.unit_id for unit in result.units)
    assert [current[unit.unit_id].body for unit in result.units] == [
        unit.text for unit in result.units
    ]


@contextmanager
def commit_before_returning(
    method: Callable[..., Any], write: Callable[[], None]
) -> Iterator[None]:
    """Run ``write`` in another thread, once, when this thread reaches a return statement of
    ``method``: the window between a per-generation cache's check and its use."""
    code = method.__code__
    done: list[bool] = []

    def trace(frame: FrameType, event: str, _: Any) -> Any:
        """Trace only ``method``'s frames; at its first return line, let the writer run."""
        if frame.f_code is not code:
            return None
        line = linecache.getline(code.co_filename, frame.f_lineno).lstrip()
        if event == "line" and not done and line.startswith("return"):
            done.append(True)
            writer = threading.Thread(target=write)
            writer.start()
            writer.join(JOIN_SECONDS)
        return trace

    previous = sys.gettrace()
    sys.settrace(trace)
    try:
        yield
    finally:
        sys.settrace(previous)
    assert done, f"{method.__qualname__} never reached a return statement"


def fts5_ranking(index: SQLiteIndex, terms: list[str]) -> list[tuple[int, float]]:
    """FTS5's own ranking for the OR of the terms, in this thread's current snapshot."""
    rows = index._connection().execute(SEARCH_SQL, (or_expression(terms), 100_000))
    return [(int(unit_id), float(score)) for unit_id, score in rows]


def test_a_ranking_keeps_its_snapshots_statistics_when_a_commit_lands_mid_call(
    index: SQLiteIndex,
) -> None:
    """The cached bm25 statistics were read twice (check, then return): a commit between the
    two gave a reader the newer generation's N and |D|, and filed its older contributions
    under the newer generation, so later searches missed the new units."""

    def write_and_rank() -> None:
        """Commit a second batch holding "batch0", then rank at the new generation."""
        index.add_documents(batch("n", 0), parallel=False)
        index.rank_expression(["carved"], 10)

    with index.snapshot():
        with commit_before_returning(SQLiteIndex._stats, write_and_rank):
            ranked = index.rank_expression(["batch0"], 100_000)
        assert ranked == fts5_ranking(index, ["batch0"])
    assert index.rank_expression(["batch0"], 100_000) == fts5_ranking(index, ["batch0"])


def test_unit_count_counts_its_own_snapshot_when_a_commit_lands_mid_call(
    index: SQLiteIndex,
) -> None:
    """unit_count() read its per-generation cache twice, so a commit in between gave a reader
    the newer generation's count."""

    def write_and_count() -> None:
        """Commit a batch, then count at the new generation."""
        index.add_documents(batch("n", 0), parallel=False)
        index.unit_count()

    with index.snapshot():
        before = index.unit_count()
        with commit_before_returning(SQLiteIndex.unit_count, write_and_count):
            assert index.unit_count() == before
    assert index.unit_count() == before + BATCH_SIZE


# -- a writer killed mid-ingest --------------------------------------------------------------


def assert_sound(path: Path) -> None:
    """SQLite's integrity check passes, and so does the FTS5 index's own (it raises if not)."""
    with sqlite3.connect(path) as connection:
        assert connection.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        connection.execute("INSERT INTO units_fts(units_fts) VALUES ('integrity-check')")


def receive_all(committed: Connection) -> list[int]:
    """Every batch number still waiting in the pipe."""
    numbers = []
    while committed.poll():
        try:
            numbers.append(committed.recv())
        except EOFError:
            break
    return numbers


KILL_MOMENTS = {
    "right after a commit": (None, 0.0),
    "a few ms after a commit": (None, 0.006),
    "inside a transaction": (4, 0.0),
}


@pytest.mark.parametrize("pipelined", [False, True], ids=["add_documents", "ingest"])
@pytest.mark.parametrize(("stall", "delay"), KILL_MOMENTS.values(), ids=KILL_MOMENTS.keys())
def test_writer_killed_mid_ingest_leaves_a_sound_file_holding_every_committed_batch(
    index_path: Path, stall: int | None, delay: float, pipelined: bool
) -> None:
    size = 150
    committed, child_end = SPAWN.Pipe(duplex=False)
    writer = SPAWN.Process(
        target=ingest_until_killed, args=(str(index_path), child_end, size, stall, pipelined)
    )
    writer.start()
    child_end.close()
    reported: list[int] = []
    while -1 not in reported and len(reported) < 4 + (stall is not None):
        assert committed.poll(JOIN_SECONDS), "the writer never reported"
        reported.append(committed.recv())
    time.sleep(delay)
    writer.kill()
    writer.join(JOIN_SECONDS)
    reported.extend(receive_all(committed))
    assert writer.exitcode == -signal.SIGKILL
    assert (-1 in reported) == (stall is not None)
    assert_sound(index_path)
    last = max(reported)
    with SQLiteIndex(index_path) as index:
        counts = Counter(doc_id.split("-")[0] for doc_id in all_document_ids(index))
        allowed = [{f"k{n}" for n in range(last + 1)}]
        if stall is None:
            allowed.append({f"k{n}" for n in range(last + 2)})
        assert set(counts) in allowed
        assert set(counts.values()) == {size}
        assert index.unit_count() == index.document_count() == size * len(counts)
        assert len(index.search("marker", limit=100_000)) == size * len(counts)
        assert index.document_frequencies(["marker"]) == {"marker": size * len(counts)}


def all_document_ids(index: SQLiteIndex) -> list[str]:
    """Every stored document id, read straight from SQLite."""
    with sqlite3.connect(index.path) as connection:
        return [row[0] for row in connection.execute("SELECT doc_id FROM documents")]
