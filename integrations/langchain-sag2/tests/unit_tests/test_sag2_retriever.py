"""SAG2Retriever's behaviour: mapping, k, filters, persistence, lifecycle, async and callbacks."""

from __future__ import annotations

import asyncio
import gc
import sys
from pathlib import Path
from typing import Any
from uuid import UUID

import pytest
from langchain_core.callbacks import AsyncCallbackHandler, BaseCallbackHandler
from langchain_core.documents import Document
from langchain_core.language_models.fake_chat_models import FakeListChatModel
from langchain_core.messages import BaseMessage
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.runnables import RunnablePassthrough
from langchain_sag2 import SAG2Retriever

from sag2_retrievers import (
    InvalidInputError,
    JudgeConfigurationError,
    JudgeError,
    RemoteJudgeRefusedError,
    SAG2Config,
    SAG2Error,
)
from sag2_retrievers.judges import Candidate, JudgeRequest, OverlapJudge, ScriptedJudge

EIFFEL_QUESTION = "Where was the designer of the Eiffel Tower born?"
PROVENANCE_KEYS = {
    "score",
    "doc_id",
    "start_index",
    "end_index",
    "sag2_round",
    "sag2_position",
    "sag2_rank",
}


def contents(documents: list[Document]) -> list[tuple[str | None, str, dict[str, Any]]]:
    """What a comparison of two result lists should look at: id, text and metadata."""
    return [(doc.id, doc.page_content, doc.metadata) for doc in documents]


def long_text(paragraphs: int, special: dict[int, str] | None = None) -> str:
    """A long document of distinct paragraphs; ``special`` adds a sentence to some of them."""
    special = special or {}
    return "\n\n".join(
        f"Paragraph {i} describes the quarry{i} and the orchard{i} near the river{i}. "
        f"{special.get(i, '')}Local records of mill{i} and bridge{i} mention the valley{i}. "
        f"Farmers of hamlet{i} trade wool{i}, cheese{i} and timber{i} at the market{i}."
        for i in range(paragraphs)
    )


class Recorder(BaseCallbackHandler):
    """Records the retriever's run id, its text lines and its custom events."""

    def __init__(self) -> None:
        self.retriever_runs: list[UUID] = []
        self.texts: list[str] = []
        self.events: list[tuple[str, Any, UUID]] = []
        self.prompts: list[str] = []

    def on_retriever_start(self, serialized: Any, query: str, *, run_id: UUID, **_: Any) -> None:
        """Note the retriever run."""
        self.retriever_runs.append(run_id)

    def on_text(self, text: str, **_: Any) -> None:
        """Note a text line."""
        self.texts.append(text)

    def on_custom_event(self, name: str, data: Any, *, run_id: UUID, **_: Any) -> None:
        """Note a custom event and the run it belongs to."""
        self.events.append((name, data, run_id))

    def on_chat_model_start(
        self, serialized: Any, messages: list[list[BaseMessage]], **_: Any
    ) -> None:
        """Note the prompt a chat model received."""
        self.prompts.extend(str(m.content) for batch in messages for m in batch)


class AsyncRecorder(AsyncCallbackHandler):
    """The async twin of ``Recorder`` for the events this module checks."""

    def __init__(self) -> None:
        self.texts: list[str] = []
        self.events: list[tuple[str, Any, UUID]] = []

    async def on_text(self, text: str, **_: Any) -> None:
        """Note a text line."""
        self.texts.append(text)

    async def on_custom_event(self, name: str, data: Any, *, run_id: UUID, **_: Any) -> None:
        """Note a custom event and the run it belongs to."""
        self.events.append((name, data, run_id))


# -- mapping ---------------------------------------------------------------------------------


def test_results_carry_source_id_chunk_text_and_provenance(
    eiffel_retriever: SAG2Retriever,
) -> None:
    """Each result is a source document: its id, its chunk, its metadata plus provenance."""
    results = eiffel_retriever.invoke(EIFFEL_QUESTION)
    eiffel = next(doc for doc in results if doc.id == "eiffel")
    assert eiffel.page_content == "Gustave Eiffel was born in Dijon in 1832."
    assert eiffel.metadata["title"] == "Gustave Eiffel"
    assert eiffel.metadata["lang"] == "fr"
    assert eiffel.metadata["doc_id"] == "eiffel"
    assert (eiffel.metadata["start_index"], eiffel.metadata["end_index"]) == (0, 41)
    for doc in results:
        assert doc.metadata.keys() >= PROVENANCE_KEYS
        assert 0.0 <= doc.metadata["score"] <= 1.0
        assert doc.metadata["sag2_round"] >= 0
        assert doc.metadata["sag2_rank"] >= 1


def test_position_counts_the_returned_list_and_rank_every_chunk_judged(tmp_path: Path) -> None:
    """``sag2_position`` is 1..k over the list returned; ``sag2_rank`` ranks every chunk, so
    with one chunk per document it skips the other chunks of a document already listed."""
    engineer = "The Eiffel Tower engineer Gustave Eiffel."
    texts = [long_text(30, {0: engineer, 29: engineer}), *[long_text(30, {0: engineer})] * 2]
    with SAG2Retriever.from_texts(
        texts, ids=["a", "b", "c"], judge=OverlapJudge(), db_path=tmp_path / "r.sqlite"
    ) as retriever:
        documents = retriever.invoke("Gustave Eiffel tower engineer", k=3)
    positions = [doc.metadata["sag2_position"] for doc in documents]
    ranks = [doc.metadata["sag2_rank"] for doc in documents]
    assert positions == [1, 2, 3]
    assert ranks[0] == 1 and ranks == sorted(set(ranks)) and ranks[-1] > 3


def test_second_hop_document_is_found_through_expansion(
    eiffel_retriever: SAG2Retriever,
) -> None:
    """Dijon shares no word with the question; the expansion round finds it."""
    dijon = next(doc for doc in eiffel_retriever.invoke(EIFFEL_QUESTION, k=4) if doc.id == "dijon")
    assert dijon.metadata["sag2_round"] >= 1


def test_offsets_reproduce_the_chunk_of_a_long_document(tmp_path: Path) -> None:
    """``source[start_index:end_index]`` is the returned chunk, not the whole document."""
    source = long_text(40, {27: "A zeppelin hangar stood beside the quarry. "})
    with SAG2Retriever.from_texts(
        [source], ids=["long"], db_path=tmp_path / "long.sqlite", judge=OverlapJudge()
    ) as retriever:
        (hit,) = retriever.invoke("zeppelin hangar")
    assert hit.id == "long"
    assert "zeppelin hangar" in hit.page_content
    assert len(hit.page_content) < len(source)
    assert source[hit.metadata["start_index"] : hit.metadata["end_index"]] == hit.page_content


def test_ids_are_unique_when_many_chunks_of_one_document_match(tmp_path: Path) -> None:
    """A document whose every chunk matches still appears once."""
    texts = [long_text(40), "The quarry3 of the valley3 is flooded.", "A river3 runs dry."]
    with SAG2Retriever.from_texts(
        texts, ids=["long", "quarry", "river"], db_path=tmp_path / "u.sqlite", judge=OverlapJudge()
    ) as retriever:
        assert retriever.index.unit_count() > 3
        ids = [doc.id for doc in retriever.invoke("quarry3 valley3 river3 paragraph", k=10)]
    assert sorted(ids) == ["long", "quarry", "river"]


def test_title_key_makes_the_title_searchable(tmp_path: Path) -> None:
    """A word only in the title metadata finds the document."""
    documents = [
        Document(page_content="Born in 1832.", metadata={"name": "Gustave Eiffel"}),
        Document(page_content="Known for mustard.", metadata={"name": "Dijon"}),
    ]
    with SAG2Retriever.from_documents(
        documents, db_path=tmp_path / "t.sqlite", judge=OverlapJudge(), title_key="name"
    ) as retriever:
        results = retriever.invoke("mustard of Dijon")
    assert results[0].page_content == "Known for mustard."


# -- ids -------------------------------------------------------------------------------------


def test_generated_ids_are_stable_and_identical_content_is_stored_once(tmp_path: Path) -> None:
    """Without ids, the id is a content hash: the same text and metadata is one document."""
    texts = ["Gustave Eiffel was born in Dijon.", "Gustave Eiffel was born in Dijon."]
    with SAG2Retriever.from_texts(
        texts, db_path=tmp_path / "s.sqlite", judge=OverlapJudge()
    ) as first:
        first_ids = first.add_documents([Document(page_content=texts[0])])
        assert first.index.document_count() == 1
    with SAG2Retriever.from_texts(
        texts[:1], metadatas=[{"v": 2}], db_path=tmp_path / "t.sqlite", judge=OverlapJudge()
    ) as second:
        second_ids = second.add_documents([Document(page_content=texts[0])])
        assert second.index.document_count() == 2
    assert first_ids == second_ids


def test_explicit_ids_override_document_ids(tmp_path: Path) -> None:
    """``ids`` wins over ``Document.id``, which wins over a generated id."""
    documents = [
        Document(id="own", page_content="Dijon mustard."),
        Document(id="own2", page_content="Paris tower."),
    ]
    with SAG2Retriever(db_path=tmp_path / "i.sqlite", judge=OverlapJudge()) as retriever:
        assert retriever.add_documents(documents[:1]) == ["own"]
        assert retriever.add_documents(documents[1:], ids=["given"]) == ["given"]
        assert retriever.index.document("own") is not None
        assert retriever.index.document("own2") is None
        assert retriever.index.document("given") is not None


def test_ids_of_the_wrong_length_are_rejected(tmp_path: Path) -> None:
    """One id per document, or an error that says so."""
    with (
        SAG2Retriever(db_path=tmp_path / "w.sqlite", judge=OverlapJudge()) as retriever,
        pytest.raises(InvalidInputError, match="one id per document"),
    ):
        retriever.add_documents([Document(page_content="a"), Document(page_content="b")], ["x"])


def test_conflicting_documents_with_one_id_are_rejected(tmp_path: Path) -> None:
    """Two different documents under one id in a batch leave the index unchanged."""
    documents = [Document(page_content="first"), Document(page_content="second")]
    with SAG2Retriever(db_path=tmp_path / "c.sqlite", judge=OverlapJudge()) as retriever:
        with pytest.raises(InvalidInputError, match="twice"):
            retriever.add_documents(documents, ids=["same", "same"])
        assert retriever.index.document_count() == 0


# -- k ---------------------------------------------------------------------------------------


def test_k_invoke_keyword_overrides_the_field(eiffel_retriever: SAG2Retriever) -> None:
    """``invoke(q, k=n)`` returns n documents whatever the field says."""
    assert len(eiffel_retriever.invoke(EIFFEL_QUESTION)) == 3
    assert len(eiffel_retriever.invoke(EIFFEL_QUESTION, k=1)) == 1
    assert len(eiffel_retriever.invoke(EIFFEL_QUESTION, k=2)) == 2


async def test_k_ainvoke_keyword_overrides_the_field(eiffel_retriever: SAG2Retriever) -> None:
    """``ainvoke(q, k=n)`` returns n documents."""
    assert len(await eiffel_retriever.ainvoke(EIFFEL_QUESTION, k=1)) == 1


def test_k_zero_returns_nothing(eiffel_retriever: SAG2Retriever) -> None:
    """k=0 is a valid request for no documents."""
    assert eiffel_retriever.invoke(EIFFEL_QUESTION, k=0) == []


def test_k_above_corpus_size_returns_each_document_once(eiffel_retriever: SAG2Retriever) -> None:
    """Asking for more documents than exist returns every reachable one, once."""
    ids = [doc.id for doc in eiffel_retriever.invoke(EIFFEL_QUESTION, k=50)]
    assert sorted(ids) == ["dijon", "eiffel", "paris", "tower"]


def test_negative_k_is_rejected(eiffel_retriever: SAG2Retriever) -> None:
    """A negative k is an input error, not an empty list."""
    with pytest.raises(InvalidInputError, match="top_k"):
        eiffel_retriever.invoke(EIFFEL_QUESTION, k=-1)


def test_empty_index_returns_nothing(tmp_path: Path) -> None:
    """A new, empty file answers with no documents, sync and async."""
    with SAG2Retriever(db_path=tmp_path / "empty.sqlite", judge=OverlapJudge()) as retriever:
        assert retriever.invoke(EIFFEL_QUESTION) == []
        assert asyncio.run(retriever.ainvoke(EIFFEL_QUESTION)) == []


# -- filters ---------------------------------------------------------------------------------


def test_filter_returns_only_matching_documents(eiffel_retriever: SAG2Retriever) -> None:
    """Equality filters hold across every round, expansion included."""
    results = eiffel_retriever.invoke(EIFFEL_QUESTION, k=10, filter={"lang": "fr"})
    assert sorted(doc.id for doc in results) == ["dijon", "eiffel"]


def test_list_filter_means_any_of(eiffel_retriever: SAG2Retriever) -> None:
    """A list value matches any of its members."""
    results = eiffel_retriever.invoke(
        EIFFEL_QUESTION, k=10, filter={"title": ["Paris", "Gustave Eiffel"]}
    )
    assert sorted(doc.id for doc in results) == ["eiffel", "paris"]


async def test_async_filter_returns_only_matching_documents(
    eiffel_retriever: SAG2Retriever,
) -> None:
    """The async path filters the same way."""
    results = await eiffel_retriever.ainvoke(EIFFEL_QUESTION, k=10, filter={"lang": "en"})
    assert sorted(doc.id for doc in results) == ["paris", "tower"]


def test_filter_finds_matches_beyond_the_unfiltered_top_k(tmp_path: Path) -> None:
    """Filtering happens before ranking, so a weak match is found, not cut off."""
    strong = [f"The tower of Paris number {i} is an iron tower in Paris." for i in range(6)]
    weak = "A tower stands in Lyon."
    metadatas = [{"city": "paris"}] * len(strong) + [{"city": "lyon"}]
    with SAG2Retriever.from_texts(
        [*strong, weak], metadatas, db_path=tmp_path / "f.sqlite", judge=OverlapJudge(), k=2
    ) as retriever:
        unfiltered = retriever.invoke("iron tower in Paris")
        filtered = retriever.invoke("iron tower in Paris", filter={"city": "lyon"})
    assert weak not in [doc.page_content for doc in unfiltered]
    assert [doc.page_content for doc in filtered] == [weak]


def test_filter_accepts_the_chroma_pgvector_dialect(eiffel_retriever: SAG2Retriever) -> None:
    """$ne, $in, $or and $and work as in Chroma and PGVector, evaluated inside SQLite."""

    def ids(filter: dict[str, Any]) -> list[str]:
        return sorted(
            doc.id for doc in eiffel_retriever.invoke(EIFFEL_QUESTION, k=10, filter=filter)
        )

    assert ids({"lang": {"$ne": "en"}}) == ["dijon", "eiffel"]
    assert ids({"lang": {"$in": ["fr"]}}) == ["dijon", "eiffel"]
    assert ids({"$or": [{"lang": "en"}, {"title": {"$eq": "Gustave Eiffel"}}]}) == [
        "eiffel",
        "paris",
        "tower",
    ]
    assert ids({"$and": [{"lang": "fr"}, {"title": {"$nin": ["Dijon"]}}]}) == ["eiffel"]


def test_filter_with_a_nan_value_is_rejected(eiffel_retriever: SAG2Retriever) -> None:
    """Values SQLite cannot compare exactly are refused, not matched loosely."""
    with pytest.raises(InvalidInputError, match="finite"):
        eiffel_retriever.invoke(EIFFEL_QUESTION, filter={"lang": {"$gt": float("nan")}})


def test_filter_with_an_unsafe_key_is_rejected(eiffel_retriever: SAG2Retriever) -> None:
    """Filter keys never reach SQL unchecked."""
    with pytest.raises(InvalidInputError, match="filter key"):
        eiffel_retriever.invoke(EIFFEL_QUESTION, filter={"lang') OR 1=1 --": "fr"})


# -- sync and async --------------------------------------------------------------------------


async def test_sync_and_async_results_are_identical(eiffel_retriever: SAG2Retriever) -> None:
    """``invoke`` and ``ainvoke`` run the same rounds and return the same documents."""
    synchronous = await asyncio.to_thread(eiffel_retriever.invoke, EIFFEL_QUESTION, k=4)
    asynchronous = await eiffel_retriever.ainvoke(EIFFEL_QUESTION, k=4)
    assert contents(asynchronous) == contents(synchronous)
    assert len(synchronous) == 4


async def test_ainvoke_leaves_the_event_loop_free_while_judging(
    eiffel_documents: list[Document], tmp_path: Path
) -> None:
    """While the judge waits, other coroutines run: here, the one that releases the judge."""
    gate = asyncio.Event()
    entered = asyncio.Event()

    async def gated(request: JudgeRequest, candidate: Candidate) -> float:
        entered.set()
        await gate.wait()
        return 0.5

    with SAG2Retriever.from_documents(
        eiffel_documents, db_path=tmp_path / "g.sqlite", judge=ScriptedJudge(gated)
    ) as retriever:
        task = asyncio.create_task(retriever.ainvoke(EIFFEL_QUESTION))
        await asyncio.wait_for(entered.wait(), timeout=5)
        assert not task.done()
        gate.set()
        results = await asyncio.wait_for(task, timeout=5)
    assert results


# -- persistence and updates -----------------------------------------------------------------


def test_reopening_the_file_returns_identical_results(
    eiffel_retriever: SAG2Retriever, eiffel_path: Path
) -> None:
    """A retriever over the same file, opened later, answers exactly the same."""
    before = eiffel_retriever.invoke(EIFFEL_QUESTION, k=4)
    eiffel_retriever.close()
    with SAG2Retriever(db_path=eiffel_path, judge=OverlapJudge()) as reopened:
        after = reopened.invoke(EIFFEL_QUESTION, k=4)
    assert len(before) == 4
    assert contents(after) == contents(before)


def test_added_documents_are_retrievable_immediately(eiffel_retriever: SAG2Retriever) -> None:
    """No rebuild step: the next query sees the new document."""
    query = "Which bridge crosses the Seine?"
    assert "bridge" not in [doc.id for doc in eiffel_retriever.invoke(query)]
    eiffel_retriever.add_documents(
        [Document(page_content="The Pont Neuf bridge crosses the Seine.")], ids=["bridge"]
    )
    assert eiffel_retriever.invoke(query)[0].id == "bridge"


def test_readding_an_id_replaces_the_document(eiffel_retriever: SAG2Retriever) -> None:
    """Adding under an existing id is an upsert, visible at once."""
    eiffel_retriever.add_documents(
        [Document(id="dijon", page_content="Dijon hosts a gastronomy fair.")]
    )
    (dijon,) = eiffel_retriever.invoke("gastronomy fair", k=1)
    assert dijon.id == "dijon"
    assert dijon.page_content == "Dijon hosts a gastronomy fair."
    assert set(dijon.metadata) == PROVENANCE_KEYS | {"title"}  # the old lang went with it


def test_deleted_documents_disappear_immediately(eiffel_retriever: SAG2Retriever) -> None:
    """Deleting returns how many existed and the next query no longer sees them."""
    assert eiffel_retriever.delete(["eiffel", "missing"]) == 1
    ids = [doc.id for doc in eiffel_retriever.invoke(EIFFEL_QUESTION, k=10)]
    assert "eiffel" not in ids
    assert ids


# -- lifecycle and configuration -------------------------------------------------------------


def test_temporary_index_is_deleted_on_close(eiffel_documents: list[Document]) -> None:
    """``db_path=None`` makes a temporary file that ``close()`` removes."""
    retriever = SAG2Retriever.from_documents(eiffel_documents, judge=OverlapJudge())
    assert retriever.db_path is not None
    assert retriever.db_path.exists()
    assert retriever.invoke(EIFFEL_QUESTION)
    retriever.close()
    assert not retriever.db_path.parent.exists()


def test_temporary_index_is_deleted_when_garbage_collected(
    eiffel_documents: list[Document],
) -> None:
    """An unclosed temporary retriever still leaves no file behind once collected."""
    retriever = SAG2Retriever.from_documents(eiffel_documents, judge=OverlapJudge())
    assert retriever.invoke(EIFFEL_QUESTION)
    assert retriever.db_path is not None
    directory = retriever.db_path.parent
    del retriever
    gc.collect()
    assert not directory.exists()


def test_closed_retriever_refuses_work(eiffel_retriever: SAG2Retriever) -> None:
    """After close, queries and writes raise an error that says how to reopen."""
    eiffel_retriever.close()
    with pytest.raises(SAG2Error, match="closed"):
        eiffel_retriever.invoke(EIFFEL_QUESTION)
    with pytest.raises(SAG2Error, match="closed"):
        eiffel_retriever.add_documents([Document(page_content="late")])


async def test_async_context_manager_closes_the_judge(
    eiffel_documents: list[Document], tmp_path: Path
) -> None:
    """``async with`` closes the retriever, its judge included, on the running loop."""
    closed: list[bool] = []

    class ClosingJudge(OverlapJudge):
        async def aclose(self) -> None:
            closed.append(True)

    async with SAG2Retriever.from_documents(
        eiffel_documents, db_path=tmp_path / "a.sqlite", judge=ClosingJudge()
    ) as retriever:
        assert await retriever.ainvoke(EIFFEL_QUESTION)
    assert closed == [True]


def test_missing_local_judge_is_a_configuration_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without a judge and with the default judge's model unreadable, the error says what to do."""
    monkeypatch.setattr("sag2_retrievers.judges.offline.pool.MODEL_FILE", "data/missing.json")
    with pytest.raises(JudgeConfigurationError, match=r"pass judge=") as caught:
        SAG2Retriever(db_path=tmp_path / "n.sqlite")
    assert "reinstall sag2-retrievers" in str(caught.value)


def test_the_default_judge_needs_no_onnxruntime(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The default pool judge is numpy only: the ``local`` extra is not needed."""
    from sag2_retrievers.judges.offline.pool import PoolJudge

    monkeypatch.setitem(sys.modules, "onnxruntime", None)
    with SAG2Retriever(db_path=tmp_path / "n.sqlite") as retriever:
        assert isinstance(retriever.judge, PoolJudge)


def test_default_judge_is_the_offline_local_judge(
    eiffel_documents: list[Document], tmp_path: Path
) -> None:
    """``judge=None`` builds the offline pool judge; a reopened index answers the same."""
    from sag2_retrievers.judges.offline.pool import PoolJudge

    path = tmp_path / "local.sqlite"
    with SAG2Retriever.from_documents(eiffel_documents, db_path=path) as retriever:
        assert isinstance(retriever.judge, PoolJudge)
        first = retriever.invoke(EIFFEL_QUESTION)
    with SAG2Retriever(db_path=path) as reopened:
        assert contents(reopened.invoke(EIFFEL_QUESTION)) == contents(first)
    assert first


def test_remote_judge_is_refused_when_disallowed(tmp_path: Path) -> None:
    """``allow_remote_judges=False`` keeps text on the machine."""

    class RemoteJudge(OverlapJudge):
        sends_data_off_machine = True

    with pytest.raises(RemoteJudgeRefusedError):
        SAG2Retriever(db_path=tmp_path / "r.sqlite", judge=RemoteJudge(), allow_remote_judges=False)


def test_mismatched_metadatas_are_rejected(tmp_path: Path) -> None:
    """``from_texts`` needs one metadata mapping per text."""
    with pytest.raises(InvalidInputError, match="metadatas"):
        SAG2Retriever.from_texts(
            ["a", "b"], [{}], db_path=tmp_path / "m.sqlite", judge=OverlapJudge()
        )


# -- chains and callbacks --------------------------------------------------------------------


def test_retriever_works_in_an_lcel_chain(eiffel_retriever: SAG2Retriever) -> None:
    """The retrieved chunks reach the model's prompt and the model's answer comes out."""
    prompt = ChatPromptTemplate.from_template(
        "Answer from the context only.\n\nContext: {context}\n\nQuestion: {question}"
    )

    def format_docs(documents: list[Document]) -> str:
        return "\n\n".join(doc.page_content for doc in documents)

    chain = (
        {"context": eiffel_retriever | format_docs, "question": RunnablePassthrough()}
        | prompt
        | FakeListChatModel(responses=["Dijon"])
        | StrOutputParser()
    )
    recorder = Recorder()
    assert chain.invoke(EIFFEL_QUESTION, config={"callbacks": [recorder]}) == "Dijon"
    (sent,) = recorder.prompts
    assert "Gustave Eiffel was born in Dijon in 1832." in sent
    assert EIFFEL_QUESTION in sent
    assert [name for name, _, _ in recorder.events][-1] == "sag2_result"


def test_run_manager_receives_every_round(eiffel_retriever: SAG2Retriever) -> None:
    """One text line and one ``sag2_round`` event per round, then a ``sag2_result`` event."""
    recorder = Recorder()
    results = eiffel_retriever.invoke(EIFFEL_QUESTION, config={"callbacks": [recorder]})
    (run_id,) = recorder.retriever_runs
    names = [name for name, _, _ in recorder.events]
    rounds = [data for name, data, _ in recorder.events if name == "sag2_round"]
    assert names == ["sag2_round"] * len(rounds) + ["sag2_result"]
    assert [data["round"] for data in rounds] == list(range(len(rounds)))
    assert len(rounds) >= 2
    assert {event_run for _, _, event_run in recorder.events} == {run_id}
    assert len(recorder.texts) == len(recorder.events)
    assert recorder.texts[1].startswith("SAG2 round 1: seeds from ")
    expansion = rounds[1]
    assert expansion["seeds"] and expansion["terms"] and expansion["new_candidates"]
    assert {seed["doc_id"] for seed in expansion["seeds"]} <= {"paris", "tower", "eiffel", "dijon"}
    outcome = recorder.events[-1][1]
    assert outcome["documents"] == [doc.id for doc in results]
    assert outcome["judgments"] == sum(data["judgments"] for data in rounds)


async def test_async_run_manager_receives_the_same_events(
    eiffel_retriever: SAG2Retriever,
) -> None:
    """``ainvoke`` reports the same rounds as ``invoke``."""
    synchronous, asynchronous = Recorder(), AsyncRecorder()
    await asyncio.to_thread(
        eiffel_retriever.invoke, EIFFEL_QUESTION, config={"callbacks": [synchronous]}
    )
    await eiffel_retriever.ainvoke(EIFFEL_QUESTION, config={"callbacks": [asynchronous]})

    def stable(events: list[tuple[str, Any, UUID]]) -> list[tuple[str, Any]]:
        timings = ("local_seconds", "judge_seconds")
        return [
            (name, {key: value for key, value in data.items() if key not in timings})
            for name, data, _ in events
        ]

    assert stable(asynchronous.events) == stable(synchronous.events)
    assert len(asynchronous.texts) == len(synchronous.texts)


def test_config_fallback_returns_bm25_order_and_reports_it(
    eiffel_documents: list[Document], tmp_path: Path
) -> None:
    """``on_judge_error="bm25"`` reaches the engine; the result event says it degraded."""

    def failing(request: JudgeRequest, candidate: Candidate) -> float:
        raise JudgeError("the judge is down")

    recorder = Recorder()
    with (
        SAG2Retriever.from_documents(
            eiffel_documents,
            db_path=tmp_path / "d.sqlite",
            judge=ScriptedJudge(failing),
            config=SAG2Config(on_judge_error="bm25"),
        ) as retriever,
        pytest.warns(UserWarning, match="judge failed"),
    ):
        results = retriever.invoke(EIFFEL_QUESTION, config={"callbacks": [recorder]})
    assert results
    name, outcome, _ = recorder.events[-1]
    assert (name, outcome["degraded"]) == ("sag2_result", True)


async def test_rounds_appear_in_the_event_stream(eiffel_retriever: SAG2Retriever) -> None:
    """``astream_events`` shows the rounds as custom events of the retriever's run."""
    events = [event async for event in eiffel_retriever.astream_events(EIFFEL_QUESTION)]
    start = next(event for event in events if event["event"] == "on_retriever_start")
    custom = [event for event in events if event["event"] == "on_custom_event"]
    assert custom[0]["name"] == "sag2_round"
    assert {event["run_id"] for event in custom} == {start["run_id"]}
