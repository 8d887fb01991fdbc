"""PostgreSQL shared by processes: readers beside a writer, and a writer killed mid-COPY.

Every batch's documents share a batch word and the marker word, so a reader can count each
batch it sees: a count other than 0 or the batch size is a torn read, and a unit count that
disagrees with the postings is a read that mixed two generations. Child processes use the
"spawn" start method and share nothing with the test process but the server.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import time
from collections import Counter
from multiprocessing.connection import Connection
from multiprocessing.synchronize import Event
from typing import Any

import pytest

from sag2_retrievers import Document

psycopg = pytest.importorskip("psycopg")
from sag2_retrievers.backends.postgres import PostgresIndex  # noqa: E402

SPAWN = multiprocessing.get_context("spawn")
BATCH_SIZE = 5
JOIN_SECONDS = 120.0
BIG_BATCH = 1_500  # documents per batch in the kill test: its COPY takes a while


def batch(number: int, version: int = 0, size: int = BATCH_SIZE) -> list[Document]:
    """Batch ``number``: ids ``b{number}-{n}``, each holding the marker word and a batch word."""
    return [
        Document(
            f"b{number}-{n}",
            f"The marker stone {n} of batch{number} was carved in version{version}, "
            f"near the {n % 7} wells of the old quarry road.",
            title=f"Stone {number} {n}",
        )
        for n in range(size)
    ]


def seen(index: PostgresIndex) -> tuple[Counter[str], int, int]:
    """In one snapshot: documents per batch on a marker search, unit count, units matched."""
    with index.snapshot():
        hits = index.rank_expression(["marker"], 1_000_000)
        units = index.units(unit for unit, _ in hits)
        counts = Counter(unit.doc_id.split("-")[0] for unit in units.values())
        return counts, index.unit_count(), len(hits)


def read_until_stopped(dsn: str, schema: str, stop: Event, results: Any) -> None:
    """A reader process: read until told to stop, reporting reads, bad reads and errors."""
    reads, bad, errors = 0, [], []
    try:
        with PostgresIndex(dsn, schema=schema, create=False) as index:
            while True:
                counts, unit_count, matched = seen(index)
                bad.extend(f"torn {name}" for name, n in counts.items() if n != BATCH_SIZE)
                if unit_count != matched:
                    bad.append(f"mixed: N={unit_count} but {matched} units hold the marker")
                reads += 1
                if reads == 1:
                    results.put(("ready", 0, [], []))
                if stop.is_set():
                    break
    except Exception as error:
        errors.append(repr(error))
    results.put(("done", reads, bad, errors))


def test_readers_beside_a_writer_see_whole_generations(
    postgres_server: Any, postgres_schema: str
) -> None:
    """Three reader processes never see a torn batch or a mixed generation while another
    process adds, upserts and deletes batches (segments merged along the way)."""
    dsn = postgres_server.dsn
    with PostgresIndex(dsn, schema=postgres_schema) as writer:
        writer.add_documents(batch(0), parallel=False)
        stop, results = SPAWN.Event(), SPAWN.Queue()
        readers = [
            SPAWN.Process(target=read_until_stopped, args=(dsn, postgres_schema, stop, results))
            for _ in range(3)
        ]
        for reader in readers:
            reader.start()
        for _ in readers:
            assert results.get(timeout=JOIN_SECONDS)[0] == "ready"
        for number in range(1, 40):
            writer.add_documents(batch(number), parallel=False)
            writer.add_documents(batch(number - 1, version=number), parallel=False)
            if number % 5 == 0:
                writer.delete([document.id for document in batch(number - 3)])
        stop.set()
        reports = [results.get(timeout=JOIN_SECONDS) for _ in readers]
        for reader in readers:
            reader.join(JOIN_SECONDS)
    assert all(report[0] == "done" for report in reports)
    assert [error for report in reports for error in report[3]] == []
    assert [bad for report in reports for bad in report[2]] == []
    assert all(report[1] > 1 for report in reports)


def ingest_reporting(dsn: str, schema: str, pipe: Connection) -> None:
    """A writer process: add big batches one transaction each, reporting each commit."""
    with PostgresIndex(dsn, schema=schema) as index:
        pipe.send(("pid", os.getpid()))
        for number in range(20):
            index.add_documents(batch(number, size=BIG_BATCH), parallel=False)
            pipe.send(("committed", number))


def wait_for_copy(dsn: str) -> None:
    """Block until some session of the server is running a COPY (the writer's next batch)."""
    deadline = time.monotonic() + JOIN_SECONDS
    with psycopg.connect(dsn, autocommit=True) as watcher:
        while time.monotonic() < deadline:
            copying = watcher.execute(
                "SELECT count(*) FROM pg_stat_activity"
                " WHERE state = 'active' AND query LIKE 'COPY%%'"
            ).fetchone()[0]
            if copying:
                return
            time.sleep(0.005)
    raise AssertionError("the writer never started a COPY")


def test_a_writer_killed_mid_copy_leaves_no_half_batch(
    postgres_server: Any, postgres_schema: str
) -> None:
    """SIGKILL of the client during COPY: each batch is whole or absent, every reported one
    is whole, the postings agree with the documents, and the next writer is not blocked."""
    dsn = postgres_server.dsn
    parent, child = SPAWN.Pipe()
    writer = SPAWN.Process(target=ingest_reporting, args=(dsn, postgres_schema, child))
    writer.start()
    committed = []
    try:
        assert parent.poll(JOIN_SECONDS)
        parent.recv()
        while not committed:
            assert parent.poll(JOIN_SECONDS), "the writer committed no batch"
            committed.append(parent.recv()[1])
        wait_for_copy(dsn)
        os.kill(writer.pid or 0, signal.SIGKILL)
        writer.join(JOIN_SECONDS)
    finally:
        if writer.is_alive():
            writer.kill()
    while parent.poll():
        committed.append(parent.recv()[1])
    with PostgresIndex(dsn, schema=postgres_schema, create=False) as index:
        counts, unit_count, matched = seen(index)
        assert set(counts.values()) == {BIG_BATCH}
        assert {f"b{number}" for number in committed} <= set(counts)
        assert unit_count == matched == index.document_count()
        index.add_documents(batch(99), parallel=False)
        assert seen(index)[0][f"b{99}"] == BATCH_SIZE
