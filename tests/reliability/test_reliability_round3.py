"""Regression tests for the third reliability round (issue 22): one test per defect found."""

from __future__ import annotations

import logging
import random
import sqlite3
import subprocess
import sys
import threading
import time
import tracemalloc
from collections.abc import Iterator, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from sag2_retrievers import SQLiteIndex
from sag2_retrievers.backends import ingest
from sag2_retrievers.backends.ingest import UnitTokens
from sag2_retrievers.backends.postgres import PostgresIndex
from sag2_retrievers.backends.sqlite.postings import BatchPostings, PostingsCounter
from sag2_retrievers.documents import Document
from sag2_retrievers.errors import (
    IndexBusyError,
    IndexUnavailableError,
    IngestError,
    InvalidInputError,
    JudgeConfigurationError,
    JudgeError,
)
from sag2_retrievers.filters import MAX_CONDITIONS
from sag2_retrievers.judges import JEVJudge, OpenAICompatJudge
from sag2_retrievers.judges.base import Candidate, JudgeRequest
from sag2_retrievers.judges.llm._secrets import HTTP_LOGGERS, read_key
from tests.postgres_server import PostgresServer

# -- item 1: deleting a large document stays linear ---------------------------------------


_HAN = "北京大学是中国的一所位于城市历史文化研究学院图书馆教授学生国家政府经济发展"


def _run_python(script: str) -> subprocess.CompletedProcess[str]:
    """Run ``script`` in a fresh interpreter from the repository root; it must succeed."""
    done = subprocess.run(
        [sys.executable, "-c", script],
        cwd=Path(__file__).resolve().parents[2],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return done


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


# -- item 2: the analysis pool never deadlocks, and no ingest wait is unbounded -----------

_FORK_WHILE_LOADING = """
import threading
from sag2_retrievers import SQLiteIndex, Document
from sag2_retrievers.analysis import tokenize
from tests.reliability.test_reliability_round3 import _han_text

loader = threading.Thread(target=tokenize, args=("北京大学",))
loader.start()
with SQLiteIndex({path!r}) as index:
    documents = [Document(f"d{{n}}", _han_text(25_000, seed=n)) for n in range(20)]
    print(index.add_documents(documents))
loader.join()
"""


def test_forking_the_pool_while_another_thread_loads_jieba_does_not_deadlock(
    tmp_path: Path,
) -> None:
    """Defect 2: workers forked while a host thread held jieba's loading lock inherited it
    held and waited for ever on their first Han text (4 of 4 trials)."""
    script = _FORK_WHILE_LOADING.format(path=str(tmp_path / "index.sqlite"))
    done = _run_python(script)
    assert int(done.stdout.split()[-1]) > 20


class _StuckStatistics(PostingsCounter):
    """Statistics whose derivation hangs, as a worker stuck on a lock would."""

    def derive(self, units: Sequence[UnitTokens]) -> BatchPostings:
        time.sleep(5)
        return super().derive(units)


def test_a_stuck_analysis_worker_is_a_clear_error_in_bounded_time(
    index_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Defect 2: ingest waited on its workers' results without a bound."""
    bound = (ingest.ANALYSIS_GRACE_SECONDS, ingest.ANALYSIS_MIN_CHARS_PER_SECOND)
    monkeypatch.setattr(ingest, "ANALYSIS_GRACE_SECONDS", 0.5)
    monkeypatch.setattr(ingest, "ANALYSIS_MIN_CHARS_PER_SECOND", 10**9)
    documents = [Document(f"d{n}", _long_text(50_000, seed=n)) for n in range(10)]
    with SQLiteIndex(index_path) as index:
        monkeypatch.setattr(index, "unit_statistics", _StuckStatistics())
        started = time.perf_counter()
        with pytest.raises(IngestError, match="did not finish"):
            index.add_documents(documents)
        assert time.perf_counter() - started < 4
        assert index.document_count() == 0
        # The next ingest forks new workers, which a loaded machine may not do in 0.5 s: it
        # gets the real bound, since what it checks is recovery, not speed.
        monkeypatch.setattr(ingest, "ANALYSIS_GRACE_SECONDS", bound[0])
        monkeypatch.setattr(ingest, "ANALYSIS_MIN_CHARS_PER_SECOND", bound[1])
        monkeypatch.setattr(index, "unit_statistics", PostingsCounter())
        assert index.add_documents(documents) > 0


# -- item 10: the host's jieba words do not change the index's analysis --------------------

_HOST_TEACHES_JIEBA = """
import jieba
from sag2_retrievers import SQLiteIndex, Document
from sag2_retrievers.analysis import tokenize

text = "北京大学是中国的一所大学，位于北京。"
before = tokenize(text)
with SQLiteIndex({path!r}) as index:
    index.add_documents([Document("pku", text)], parallel=False)
    plain = jieba.lcut(text)
    jieba.add_word("学是中国", freq=10**9)
    assert jieba.lcut(text) != plain, "the host's word changes jieba's own cut"
    assert tokenize(text) == before, (tokenize(text), before)
    assert index.query_terms("北京大学是中国的") == {terms!r}
    print(index.delete(["pku"]))
"""


def test_a_host_teaching_jieba_words_does_not_change_the_indexs_analysis(
    tmp_path: Path,
) -> None:
    """Defect 10: jieba.add_word in the host changed re-analysis (deletes refused by the
    checksum check) and question terms; the index now has its own jieba tokenizer."""
    with SQLiteIndex(tmp_path / "probe.sqlite") as probe:
        terms = probe.query_terms("北京大学是中国的")
    script = _HOST_TEACHES_JIEBA.format(path=str(tmp_path / "index.sqlite"), terms=terms)
    done = _run_python(script)
    assert done.stdout.split()[-1] == "1"


# -- item 4: wide metadata filters ---------------------------------------------------------


def _wide_index(path: Path) -> SQLiteIndex:
    """An index of 60 documents, each with a numeric ``n`` and a text ``tag``."""
    index = SQLiteIndex(path)
    documents = [
        Document(f"d{n}", f"alpha bravo w{n}", metadata={"n": n, "tag": f"t{n % 7}"})
        for n in range(60)
    ]
    index.add_documents(documents, parallel=False)
    return index


@pytest.mark.parametrize("group", ["$or", "$and"])
def test_a_flat_group_of_two_thousand_conditions_compiles(index_path: Path, group: str) -> None:
    """Defect 4: a flat $or / $and of 992 or more conditions raised SQLite's raw
    "Expression tree is too large"; it now gives what the equivalent filter gives."""
    if group == "$or":
        wide = {"$or": [{"n": value} for value in range(0, 4000, 2)]}
        same = {"n": {"$in": list(range(0, 4000, 2))}}
    else:
        wide = {"$and": [{"n": {"$ne": value}} for value in range(1, 4001, 2)]}
        same = {"n": {"$nin": list(range(1, 4001, 2))}}
    with _wide_index(index_path) as index:
        index._connection().setlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER, 32_766)
        assert index.allowed_units(wide) == index.allowed_units(same)
        assert len(index.allowed_units(wide)) == 30
        assert index.rank_expression(["alpha"], 100, filters=wide) == index.rank_expression(
            ["alpha"], 100, filters=same
        )
        terms = [f"w{n}" for n in range(60)]
        expanded = index.expand(terms, ["alpha", "bravo"], set(), 5, filters=wide)
        assert expanded == index.expand(terms, ["alpha", "bravo"], set(), 5, filters=same)
        assert sum(map(len, expanded.values())) == 30


def test_a_filter_beyond_the_condition_limit_is_invalid_input(index_path: Path) -> None:
    """Defect 4: past a documented limit, filters are refused before any SQL is built."""
    with _wide_index(index_path) as index:
        too_wide = {"$or": [{"n": value} for value in range(MAX_CONDITIONS + 1)]}
        with pytest.raises(InvalidInputError, match="conditions, more than the limit"):
            index.search("alpha", 5, filters=too_wide)


# -- item 9: API keys never reach logs or errors -------------------------------------------

KEY = "sk-test-0123456789abcdef"


class _EchoAuthorization(BaseHTTPRequestHandler):
    """Refuses every request, echoing the caller's Authorization header in its own headers."""

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        body = b'{"error": "no"}'
        self.send_response(401)
        self.send_header("X-Echo", self.headers.get("Authorization", ""))
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        """Quiet: the test reads the client's logs only."""


@pytest.fixture
def echo_server() -> Iterator[str]:
    """An HTTP server on 127.0.0.1 that echoes Authorization; yields its base URL."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _EchoAuthorization)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()
    server.server_close()


def _one_request() -> JudgeRequest:
    return JudgeRequest("q", (Candidate("t", "passage"),))


@pytest.mark.parametrize("padding", ["\n", "\r\n", " \t"])
async def test_a_key_with_surrounding_whitespace_is_sent_stripped_and_never_logged(
    echo_server: str, caplog: pytest.LogCaptureFixture, padding: str
) -> None:
    """Defect 9: a trailing newline reached the header, so httpx refused it and printed the
    key in the JudgeError; and httpcore's DEBUG log printed the echoed header."""
    caplog.set_level(logging.DEBUG)
    judge = OpenAICompatJudge(echo_server, "m", api_key=KEY + padding, max_attempts=1)
    with pytest.raises(JudgeError) as caught:
        await judge.score(_one_request())
    await judge.aclose()
    assert "the API key was rejected" in str(caught.value)
    assert "httpcore" in caplog.text and "X-Echo" in caplog.text
    assert KEY not in caplog.text and KEY not in str(caught.value)


@pytest.mark.parametrize("bad", ["sk-a\x00b", "sk-a\nb", "sk-a\x7fb", "sk-ä-key"])
def test_a_key_with_a_control_or_non_ascii_character_is_refused_without_showing_it(
    bad: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Defects 9 and 10: such keys reached the header (printed in errors, or a raw
    UnicodeEncodeError that skipped the bm25 fall-back); now a configuration error."""
    with pytest.raises(JudgeConfigurationError, match="not shown") as direct:
        OpenAICompatJudge("http://127.0.0.1:9/v1", "m", api_key=bad)
    errors = [direct.value]
    if "\x00" not in bad:  # an environment variable cannot hold NUL
        monkeypatch.setenv("OPENROUTER_API_KEY", bad)
        with pytest.raises(JudgeConfigurationError, match="OPENROUTER_API_KEY") as from_env:
            JEVJudge()
        errors.append(from_env.value)
    for error in errors:
        assert bad[:4] not in str(error) and bad[:4] not in repr(error)


def test_the_http_libraries_loggers_redact_every_live_key(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Defect 9: the filter on httpx's and httpcore's loggers rewrites any record naming a key."""
    caplog.set_level(logging.DEBUG)
    key = read_key("sk-live-key-42", "a test")
    for name in HTTP_LOGGERS:
        logging.getLogger(name).debug("headers %r", [(b"Authorization", b"Bearer sk-live-key-42")])
    assert "sk-live-key-42" not in caplog.text
    assert caplog.text.count("[redacted]") == len(HTTP_LOGGERS)
    assert key.reveal() == "sk-live-key-42"


# -- item 10: the smaller defects ------------------------------------------------------------


@pytest.mark.parametrize("metadata", [{"a": "b\x00c"}, {"a\x00": 1}, {"a": ["ok", {"b": "\x00"}]}])
def test_nul_in_a_metadata_string_is_refused_for_every_backend(metadata: dict[str, Any]) -> None:
    """Defect 10: SQLite stored NUL in metadata strings but PostgreSQL could not; one rule."""
    with pytest.raises(InvalidInputError, match="NUL"):
        Document("x", "alpha", metadata=metadata)


def test_document_units_refuses_an_id_holding_nul(index_path: Path) -> None:
    """Defect 10: json_each cut "a\\x00b" at the NUL, so it returned the units of "a"."""
    with SQLiteIndex(index_path) as index:
        index.add_documents([Document("a", "alpha bravo")], parallel=False)
        with pytest.raises(InvalidInputError, match="NUL"):
            index.document_units(["a\x00b"])


def test_postgres_refuses_nul_ids_and_reports_server_failures_as_one_error(
    postgres_server: PostgresServer, postgres_schema: str
) -> None:
    """Defect 10: psycopg's DataError (NUL in an id) and OperationalError (a lost connection)
    came through raw; NUL is refused as on SQLite, and server failures are one error type."""
    psycopg = pytest.importorskip("psycopg")
    with PostgresIndex(postgres_server.dsn, schema=postgres_schema) as index:
        index.add_documents([Document("a", "alpha bravo")], parallel=False)
        for call in (index.delete, index.document_units, index.metadata):
            with pytest.raises(InvalidInputError, match="NUL"):
                call(["a\x00b"])
        backend = index._fetch("SELECT pg_backend_pid()")[0][0]
        with psycopg.connect(postgres_server.dsn, autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(%s)", (backend,))
        with pytest.raises(IndexUnavailableError, match="the server failed the request"):
            index.document_count()


def test_fetching_a_few_units_does_not_read_their_whole_documents(index_path: Path) -> None:
    """Defect 10: units() read each whole document text (here 400 KB) to cut a 2,200-character
    unit; SQLite now cuts a document's few units itself."""
    text = _han_text(200_000) + "😀 tail"
    with SQLiteIndex(index_path) as index:
        index.add_documents([Document("big", text)], parallel=False)
        all_units = index.document_units(["big"])
        assert all(
            unit.body == text[unit.char_start : unit.char_end] for unit in all_units.values()
        )
        last = max(all_units)
        tracemalloc.start()
        try:
            [unit] = index.units([last]).values()
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert unit.body == text[unit.char_start : unit.char_end] and unit.body.endswith("tail")
        assert peak < 200_000, peak


def test_postgres_takes_the_same_wide_filters(
    postgres_server: PostgresServer, postgres_schema: str
) -> None:
    """Defect 4 on PostgreSQL: a flat $or of 2,000 conditions gives what the $in list gives."""
    wide = {"$or": [{"n": value} for value in range(0, 4000, 2)]}
    same = {"n": {"$in": list(range(0, 4000, 2))}}
    documents = [Document(f"d{n}", f"alpha w{n}", metadata={"n": n}) for n in range(60)]
    with PostgresIndex(postgres_server.dsn, schema=postgres_schema) as index:
        index.add_documents(documents, parallel=False)
        assert index.allowed_units(wide) == index.allowed_units(same)
        assert len(index.allowed_units(wide)) == 30
        ranked = index.rank_expression(["alpha"], 100, filters=wide)
        assert ranked == index.rank_expression(["alpha"], 100, filters=same)
        terms = [f"w{n}" for n in range(60)]
        expanded = index.expand(terms, ["alpha"], set(), 5, filters=wide)
        assert expanded == index.expand(terms, ["alpha"], set(), 5, filters=same)
