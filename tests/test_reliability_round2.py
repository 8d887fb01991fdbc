"""Regression tests for the second reliability round (issue 12): one test per defect found."""

from __future__ import annotations

import socket
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from sag2_retrievers import IndexSettings
from sag2_retrievers.documents import Document
from sag2_retrievers.errors import IndexSettingsMismatchError, InvalidInputError, JudgeError
from sag2_retrievers.index import SQLiteIndex
from sag2_retrievers.judges import JEVJudge, OpenAICompatJudge
from sag2_retrievers.judges.base import Candidate, JudgeRequest
from tests.fault_server import FaultServer


def test_nul_in_a_document_id_is_rejected() -> None:
    """Defect 1: json_each cuts ids at NUL, so an id holding one could never be found again."""
    with pytest.raises(InvalidInputError, match="NUL"):
        Document("a\x00b", "delta echo")


def test_delete_with_a_nul_id_is_rejected_and_deletes_nothing(index_path: Path) -> None:
    """Defect 1: 'victim\\x00anything' used to delete the document 'victim'."""
    with SQLiteIndex(index_path) as index:
        index.add_documents([Document("victim", "alpha bravo")], parallel=False)
        with pytest.raises(InvalidInputError, match="NUL"):
            index.delete(["victim\x00anything"])
        with pytest.raises(InvalidInputError, match="NUL"):
            index.metadata(["victim\x00anything"])
        assert index.document("victim") is not None
        assert index.document_count() == 1


class _ProxyTrap:
    """A listener standing in for a proxy: it counts connections and answers nothing."""

    def __init__(self) -> None:
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(8)
        self.listener.settimeout(0.05)
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        self.connections = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                connection, _ = self.listener.accept()
            except OSError:
                continue
            self.connections += 1
            connection.close()

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        self.listener.close()


@pytest.fixture
def proxy_trap(monkeypatch: pytest.MonkeyPatch) -> Iterator[_ProxyTrap]:
    """Every proxy variable httpx reads points at the trap."""
    trap = _ProxyTrap()
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "all_proxy"):
        monkeypatch.setenv(name, trap.url)
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    yield trap
    trap.close()


REQUEST = JudgeRequest("who wrote it", (Candidate("The Hobbit", "Tolkien wrote it."),))


async def test_loopback_openai_judge_ignores_proxy_variables(proxy_trap: _ProxyTrap) -> None:
    """Defect 2: an on-machine judge must never hand the question to a proxy host."""
    with FaultServer() as server:
        judge = OpenAICompatJudge(server.url, "m", max_attempts=1)
        assert judge.sends_data_off_machine is False
        scores = await judge.score(REQUEST)
        await judge.aclose()
        assert len(scores) == 1 and server.stats.requests == 1
    assert proxy_trap.connections == 0


async def test_jev_judge_uses_only_an_explicit_proxy(proxy_trap: _ProxyTrap) -> None:
    """Defect 2: the JEV judge ignores proxy variables; a proxy is its ``proxy=`` argument."""
    with FaultServer() as server:
        async with JEVJudge("k", base_url=server.url, max_attempts=1) as judge:
            assert len(await judge.score(REQUEST)) == 1
        assert server.stats.requests == 1
        assert proxy_trap.connections == 0
        async with JEVJudge("k", base_url=server.url, max_attempts=1, proxy=proxy_trap.url) as j:
            with pytest.raises(JudgeError):
                await j.score(REQUEST)
        assert proxy_trap.connections >= 1
        assert server.stats.requests == 1


@pytest.mark.parametrize("value", [0, -5, "abc", 2.5, None, True, 10**12])
def test_index_settings_reject_a_bad_chunk_size(value: object) -> None:
    """Defect 3: chunk_chars=0 looped forever and bad types left an unreadable meta row."""
    with pytest.raises(InvalidInputError, match="chunk_chars"):
        IndexSettings(chunk_chars=value)  # type: ignore[arg-type]


@pytest.mark.parametrize("stored", ["0", "-1", "abc", "2.5", ""])
def test_a_bad_setting_read_back_from_meta_is_a_mismatch(index_path: Path, stored: str) -> None:
    """Defect 3: a corrupt meta row must fail the open clearly, not hang a later ingest."""
    SQLiteIndex(index_path).close()
    with sqlite3.connect(index_path) as connection:
        connection.execute("UPDATE meta SET value = ? WHERE key = 'chunk_chars'", (stored,))
    connection.close()
    with pytest.raises(IndexSettingsMismatchError, match="chunk_chars"):
        SQLiteIndex(index_path)


def test_settings_must_be_index_settings(index_path: Path) -> None:
    """Defect 3: a dict in place of IndexSettings is refused before the file is touched."""
    with pytest.raises(InvalidInputError, match="IndexSettings"):
        SQLiteIndex(index_path, {"chunk_chars": 10})  # type: ignore[arg-type]
    assert not index_path.exists()
