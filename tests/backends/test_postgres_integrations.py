"""Both framework retrievers and the CLI over a PostgresIndex on a real server."""

from __future__ import annotations

from pathlib import Path

import pytest

from sag2_retrievers.judges.fakes import OverlapJudge

pytest.importorskip("psycopg")
from sag2_retrievers.backends.postgres import PostgresIndex

TEXTS = (
    ("Port Varna", "Port Varna lies in the province of Ostrel."),
    ("Lantern Festival", "The Lantern Festival is hosted by Port Varna."),
    ("Ostrel", "Ostrel is a northern province with a long coast."),
)
QUESTION = "Which province hosts the Lantern Festival?"


def test_llamaindex_retriever_uses_a_postgres_backend(postgres_server, postgres_schema) -> None:  # type: ignore[no-untyped-def]
    """from_defaults(backend=PostgresIndex(...)) indexes there and retrieves the chain."""
    from llama_index.core import Document
    from llama_index.retrievers.sag2 import SAG2Retriever

    backend = PostgresIndex(postgres_server.dsn, schema=postgres_schema)
    docs = [Document(text=text, metadata={"title": title}, id_=title) for title, text in TEXTS]
    retriever = SAG2Retriever.from_defaults(
        documents=docs, backend=backend, judge=OverlapJudge(), similarity_top_k=3
    )
    assert backend.document_count() == 3
    titles = [hit.node.metadata["title"] for hit in retriever.retrieve(QUESTION)]
    assert titles[0] == "Lantern Festival"
    assert set(titles) == {"Port Varna", "Lantern Festival", "Ostrel"}
    retriever.delete_ref_doc("Ostrel")
    assert backend.document_count() == 2


def test_llamaindex_refuses_a_backend_with_a_persist_path(
    postgres_server, postgres_schema, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    """An open backend and an SQLite file are alternatives, never both."""
    from llama_index.retrievers.sag2 import SAG2Retriever

    from sag2_retrievers import InvalidInputError

    backend = PostgresIndex(postgres_server.dsn, schema=postgres_schema)
    with pytest.raises(InvalidInputError):
        SAG2Retriever.from_defaults(
            nodes=[], backend=backend, persist_path=tmp_path / "x.sqlite", judge=OverlapJudge()
        )


def test_langchain_retriever_uses_a_postgres_backend(postgres_server, postgres_schema) -> None:  # type: ignore[no-untyped-def]
    """SAG2Retriever(backend=PostgresIndex(...)) adds, retrieves and deletes there."""
    from langchain_core.documents import Document
    from langchain_sag2 import SAG2Retriever

    backend = PostgresIndex(postgres_server.dsn, schema=postgres_schema)
    retriever = SAG2Retriever(backend=backend, judge=OverlapJudge(), k=3)
    ids = retriever.add_documents(
        [Document(page_content=text, metadata={"title": title}) for title, text in TEXTS]
    )
    assert backend.document_count() == 3
    found = retriever.invoke(QUESTION)
    assert found[0].metadata["title"] == "Lantern Festival"
    retriever.delete(ids[:1])
    assert backend.document_count() == 2


def test_cli_indexes_and_queries_a_postgres_url(postgres_server, tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    """`sag2 index --db postgresql://...` then `sag2 query` on it; the URL's password is hidden."""
    import json

    from sag2_retrievers.cli import main

    corpus = tmp_path / "corpus.json"
    corpus.write_text(json.dumps([{"title": t, "text": x} for t, x in TEXTS]))
    url = f"postgresql://postgres:s3cret@127.0.0.1:{postgres_server.port}/postgres"
    assert main(["index", str(corpus), "--db", url]) == 0
    printed = capsys.readouterr().out
    assert "holds 3 documents" in printed and "s3cret" not in printed
    assert main(["query", "--db", url, "--judge", "fake", "--json", QUESTION]) == 0
    reply = json.loads(capsys.readouterr().out)
    assert reply["hits"][0]["title"] == "Lantern Festival"


def test_cli_evaluates_on_a_postgres_index(postgres_server, tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    """`sag2 eval --db postgresql://...` reads an index built there; the password stays hidden."""
    import json

    from sag2_retrievers.cli import main
    from tests.conftest import SHARED_DATA

    questions = SHARED_DATA / "hipporag_format_samples" / "sample.json"
    corpus = SHARED_DATA / "hipporag_format_samples" / "sample_corpus.json"
    if not questions.exists():
        pytest.skip("shared sample data not found")
    url = f"postgresql://postgres:s3cret@127.0.0.1:{postgres_server.port}/postgres"
    assert main(["index", str(corpus), "--db", url]) == 0
    report = tmp_path / "report.json"
    code = main(
        ["eval", str(questions), "--db", url, "--method", "bm25", "--out", str(report), "-q"]
    )
    assert code == 0
    text = report.read_text()
    assert "s3cret" not in text and "s3cret" not in capsys.readouterr().out
    reply = json.loads(text)
    assert reply["n_questions"] == 1 and reply["recall_at"]
    assert reply["db"] == f"postgresql://postgres@127.0.0.1:{postgres_server.port}/postgres"
