"""Behaviour of SAG2Retriever as a LlamaIndex retriever, with deterministic offline judges."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from llama_index.core import StorageContext, VectorStoreIndex
from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.embeddings import MockEmbedding
from llama_index.core.llms import MockLLM
from llama_index.core.node_parser import TokenTextSplitter
from llama_index.core.prompts import PromptTemplate
from llama_index.core.query_engine import RetrieverQueryEngine
from llama_index.core.schema import (
    BaseNode,
    Document,
    MetadataMode,
    NodeRelationship,
    NodeWithScore,
    RelatedNodeInfo,
    TextNode,
)
from llama_index.core.storage.docstore import SimpleDocumentStore
from llama_index.core.vector_stores.types import (
    FilterCondition,
    FilterOperator,
    MetadataFilter,
    MetadataFilters,
)
from llama_index.retrievers.sag2 import SAG2QueryBundle, SAG2Retriever

from sag2_retrievers import (
    Document as CoreDocument,
)
from sag2_retrievers import (
    IndexSettings,
    IndexSettingsMismatchError,
    IndexUnavailableError,
    InvalidInputError,
    JudgeError,
    SAG2Config,
    SQLiteIndex,
)
from sag2_retrievers.judges import DEFAULT_INSTRUCTION, OverlapJudge, ScriptedJudge

QUESTION = "Where was the engineer who designed the Eiffel Tower born?"


def corpus() -> list[Document]:
    """A small two-hop corpus: tower -> engineer -> birthplace, plus distractors."""
    texts = {
        "tower": (
            "Eiffel Tower",
            "The Eiffel Tower in Paris was designed by the engineer Gustave Eiffel.",
        ),
        "eiffel": ("Gustave Eiffel", "Gustave Eiffel was born in Dijon, in Burgundy, in 1832."),
        "dijon": ("Dijon", "Dijon is a city in Burgundy, famous for its mustard."),
        "paris": ("Paris", "Paris is the capital of France and home to many towers."),
        "statue": (
            "Statue of Liberty",
            "Gustave Eiffel engineered the frame of the Statue of Liberty.",
        ),
        "bridge": (
            "Garabit viaduct",
            "The Garabit viaduct is a railway bridge designed by an engineer.",
        ),
    }
    return [
        Document(id_=key, text=text, metadata={"title": title, "group": "a" if i < 3 else "b"})
        for i, (key, (title, text)) in enumerate(texts.items())
    ]


def source_id(node: BaseNode) -> str:
    """The id of the node's SOURCE document."""
    assert node.source_node is not None
    return node.source_node.node_id


def summary(results: list[NodeWithScore]) -> list[tuple[object, ...]]:
    """What a comparison of two result lists should look at: ids, scores, text, provenance."""
    return [
        (
            r.node.node_id,
            r.score,
            r.node.get_content(),
            dict(r.node.metadata),
            source_id(r.node),
            getattr(r.node, "start_char_idx", None),
            getattr(r.node, "end_char_idx", None),
        )
        for r in results
    ]


@pytest.fixture
def retriever() -> Iterator[SAG2Retriever]:
    """A retriever over the small corpus with the lexical-overlap judge."""
    with SAG2Retriever.from_defaults(documents=corpus(), judge=OverlapJudge()) as opened:
        yield opened


def test_is_a_llama_index_retriever(retriever: SAG2Retriever) -> None:
    """The adapter plugs into anything that takes a BaseRetriever."""
    assert isinstance(retriever, BaseRetriever)


def test_results_carry_judge_scores_and_sag2_metadata(retriever: SAG2Retriever) -> None:
    """Each result keeps its metadata and adds round, rank and judge score."""
    results = retriever.retrieve(QUESTION)
    assert results
    for result in results:
        metadata = result.node.metadata
        assert metadata["judge_score"] == result.score
        assert metadata["group"] in ("a", "b")
        assert isinstance(metadata["sag2_round"], int)
        assert isinstance(metadata["sag2_rank"], int)
        assert "_sag2" not in metadata
    assert [r.score for r in results] == sorted((r.score or 0.0 for r in results), reverse=True)


def test_sag2_fields_are_hidden_from_llm_and_embeddings(retriever: SAG2Retriever) -> None:
    """The bookkeeping keys never reach an LLM prompt or an embedding."""
    node = retriever.retrieve(QUESTION)[0].node
    for mode in (MetadataMode.LLM, MetadataMode.EMBED):
        content = node.get_content(metadata_mode=mode)
        assert "judge_score" not in content and "sag2_rank" not in content
        assert "title:" in content


async def test_sync_and_async_return_the_same_nodes(retriever: SAG2Retriever) -> None:
    """`aretrieve` runs the same retrieval as `retrieve`, without blocking."""
    assert summary(await retriever.aretrieve(QUESTION)) == summary(retriever.retrieve(QUESTION))


def test_unchunked_nodes_keep_their_node_ids(retriever: SAG2Retriever) -> None:
    """A node SAG2 did not cut is returned under its own id (evaluators match on ids)."""
    ids = [r.node.node_id for r in retriever.retrieve(QUESTION)]
    assert set(ids) <= {doc.id_ for doc in corpus()}
    assert ids[0] in ("tower", "eiffel")


def test_result_ids_are_unique() -> None:
    """Ids never repeat, even when one long document yields many units."""
    long_document = Document(id_="long", text=long_text(), metadata={"title": "Long"})
    with SAG2Retriever.from_defaults(
        documents=[*corpus(), long_document], judge=OverlapJudge(), similarity_top_k=50
    ) as retriever:
        ids = [r.node.node_id for r in retriever.retrieve("Gustave Eiffel engineer paragraph")]
    assert len(ids) == len(set(ids)) > 1


# -- source mapping ------------------------------------------------------------------------


def long_text() -> str:
    """About 8,000 characters in paragraphs, so SAG2 cuts it into several units."""
    paragraphs = [
        f"Paragraph {i} describes the harbour of Port {i} and its lighthouse keeper number {i}. "
        + "The keeper logs ships, weather and tides every single day of the year. " * 2
        for i in range(60)
    ]
    paragraphs[37] += "The lighthouse keeper of Port 37 discovered a rare emerald parrot."
    return "\n\n".join(paragraphs)


def test_chunk_of_a_long_document_maps_back_to_its_span() -> None:
    """A unit cut from a long document points at the document and its exact characters."""
    document = Document(id_="harbours", text=long_text(), metadata={"title": "Harbours"})
    with SAG2Retriever.from_defaults(documents=[document], judge=OverlapJudge()) as retriever:
        results = retriever.retrieve("Which keeper discovered the emerald parrot?")
    node = results[0].node
    assert isinstance(node, TextNode)
    assert source_id(node) == "harbours"
    assert node.start_char_idx is not None and node.end_char_idx is not None
    assert document.text[node.start_char_idx : node.end_char_idx] == node.text
    assert "emerald parrot" in node.text
    assert len(node.text) < len(document.text)
    assert node.node_id == f"harbours:{node.start_char_idx}-{node.end_char_idx}"


def test_splitter_nodes_map_back_to_absolute_offsets_in_their_source() -> None:
    """Nodes from a LlamaIndex splitter keep SOURCE and offsets in the original document."""
    source = Document(id_="source", text=long_text(), metadata={"title": "Harbours"})
    splitter = TokenTextSplitter(chunk_size=120, chunk_overlap=0, tokenizer=str.split)
    nodes = splitter.get_nodes_from_documents([source])
    with SAG2Retriever.from_defaults(
        nodes=nodes, judge=OverlapJudge(), similarity_top_k=5
    ) as retriever:
        results = retriever.retrieve("Which keeper discovered the emerald parrot?")
    assert "emerald parrot" in results[0].node.get_content()
    for result in results:
        node = result.node
        assert isinstance(node, TextNode)
        assert source_id(node) == "source"
        assert node.start_char_idx is not None and node.end_char_idx is not None
        assert source.text[node.start_char_idx : node.end_char_idx] == node.text


def test_long_node_cut_by_sag2_maps_to_absolute_offsets_in_its_source() -> None:
    """Offsets add up: the node's start in its source plus the unit's start in the node."""
    prefix = "Preface about harbours.\n\n"
    body = long_text()
    source_text = prefix + body
    node = TextNode(
        id_="node-1",
        text=body,
        start_char_idx=len(prefix),
        end_char_idx=len(source_text),
        relationships={NodeRelationship.SOURCE: RelatedNodeInfo(node_id="book")},
    )
    with SAG2Retriever.from_defaults(nodes=[node], judge=OverlapJudge()) as retriever:
        result = retriever.retrieve("Which keeper discovered the emerald parrot?")[0].node
    assert isinstance(result, TextNode)
    assert source_id(result) == "book"
    assert result.start_char_idx is not None and result.end_char_idx is not None
    assert result.start_char_idx > len(prefix)
    assert source_text[result.start_char_idx : result.end_char_idx] == result.text


def test_node_with_inconsistent_offsets_gets_none_rather_than_wrong_ones() -> None:
    """Recorded offsets that do not span the node's text are not trusted."""
    node = TextNode(
        id_="n",
        text="Gustave Eiffel was born in Dijon.",
        start_char_idx=10,
        end_char_idx=12,
        relationships={NodeRelationship.SOURCE: RelatedNodeInfo(node_id="book")},
    )
    with SAG2Retriever.from_defaults(nodes=[node], judge=OverlapJudge()) as retriever:
        result = retriever.retrieve("Where was Eiffel born?")[0].node
    assert isinstance(result, TextNode)
    assert source_id(result) == "book"
    assert (result.start_char_idx, result.end_char_idx) == (None, None)


def test_reserved_metadata_key_is_rejected() -> None:
    """A node already using the adapter's metadata key is refused, not overwritten."""
    node = TextNode(id_="n", text="some text", metadata={"_sag2": 1})
    with pytest.raises(InvalidInputError, match="_sag2"):
        SAG2Retriever.from_defaults(nodes=[node], judge=OverlapJudge())


# -- top-k edge cases ----------------------------------------------------------------------


def test_zero_top_k_returns_nothing_without_judging() -> None:
    """similarity_top_k=0 spends no judgment."""
    judge = ScriptedJudge({}, default=0.5)
    with SAG2Retriever.from_defaults(
        documents=corpus(), judge=judge, similarity_top_k=0
    ) as retriever:
        assert retriever.retrieve(QUESTION) == []
    assert judge.requests == []


def test_top_k_beyond_the_corpus_returns_each_matching_node_once() -> None:
    """Asking for more nodes than exist returns every match, once."""
    with SAG2Retriever.from_defaults(
        documents=corpus(), judge=OverlapJudge(), similarity_top_k=1000
    ) as retriever:
        ids = [r.node.node_id for r in retriever.retrieve("Eiffel engineer Dijon Paris bridge")]
    assert sorted(ids) == sorted(doc.id_ for doc in corpus())


def test_empty_index_returns_nothing() -> None:
    """A retriever with no nodes answers with an empty list."""
    with SAG2Retriever.from_defaults(judge=OverlapJudge()) as retriever:
        assert retriever.retrieve(QUESTION) == []


@pytest.mark.parametrize("top_k", [-1, 2.5, True])
def test_invalid_top_k_is_rejected(top_k: object) -> None:
    """similarity_top_k must be a non-negative integer."""
    with pytest.raises(InvalidInputError, match="similarity_top_k"):
        SAG2Retriever.from_defaults(judge=OverlapJudge(), similarity_top_k=top_k)


# -- changing the index --------------------------------------------------------------------


def test_added_nodes_are_retrievable_at_once(retriever: SAG2Retriever) -> None:
    """add_nodes takes effect for the next query, without a rebuild."""
    retriever.add_nodes([TextNode(id_="new", text="The okapi lives in the Ituri rainforest.")])
    assert retriever.retrieve("Where does the okapi live?")[0].node.node_id == "new"


def test_adding_a_node_id_again_replaces_it(retriever: SAG2Retriever) -> None:
    """Adding a node with a known id updates it instead of duplicating it."""
    retriever.add_documents([Document(id_="dijon", text="Dijon hosts a famous gastronomy fair.")])
    results = retriever.retrieve("gastronomy fair")
    assert results[0].node.node_id == "dijon"
    assert results[0].node.get_content() == "Dijon hosts a famous gastronomy fair."
    assert retriever.sqlite_index.document_count() == len(corpus())


def test_delete_ref_doc_removes_every_node_of_that_source() -> None:
    """All chunks of a source document disappear at once; other sources stay."""
    splitter = TokenTextSplitter(chunk_size=60, chunk_overlap=0, tokenizer=str.split)
    source = Document(id_="harbours", text=long_text())
    nodes = splitter.get_nodes_from_documents([source, *corpus()])
    with SAG2Retriever.from_defaults(
        nodes=nodes, judge=OverlapJudge(), similarity_top_k=100
    ) as retriever:
        before = retriever.sqlite_index.document_count()
        retriever.delete_ref_doc("harbours")
        sources = {
            source_id(r.node) for r in retriever.retrieve("keeper harbour lighthouse Eiffel Dijon")
        }
        assert "harbours" not in sources
        assert "eiffel" in sources
        assert retriever.sqlite_index.document_count() == len(corpus()) < before


def test_delete_ref_doc_removes_a_document_indexed_whole(retriever: SAG2Retriever) -> None:
    """A Document indexed as is is its own source."""
    retriever.delete_ref_doc("eiffel")
    assert "eiffel" not in {r.node.node_id for r in retriever.retrieve(QUESTION)}


def test_delete_nodes_removes_them_at_once(retriever: SAG2Retriever) -> None:
    """delete_nodes takes effect for the next query."""
    retriever.delete_nodes(["tower", "unknown-id"])
    assert "tower" not in {r.node.node_id for r in retriever.retrieve(QUESTION)}


# -- filters -------------------------------------------------------------------------------


def group_filter(*groups: str) -> MetadataFilters:
    """Filters for one group (EQ) or several (IN)."""
    if len(groups) == 1:
        return MetadataFilters(filters=[MetadataFilter(key="group", value=groups[0])])
    return MetadataFilters(
        filters=[MetadataFilter(key="group", value=list(groups), operator=FilterOperator.IN)]
    )


def ranked_corpus() -> list[Document]:
    """Ten strong matches in group "a" and two weak ones in group "b"."""
    strong = [
        Document(id_=f"a{i}", text=f"Alpha beta gamma report number {i}.", metadata={"group": "a"})
        for i in range(10)
    ]
    weak = [
        Document(id_=f"b{i}", text=f"A gamma note, item {i}.", metadata={"group": "b"})
        for i in range(2)
    ]
    return strong + weak


def test_filtered_query_returns_only_matching_nodes_even_beyond_the_unfiltered_top_k() -> None:
    """Filters run inside SQLite: no leak, and matches ranked below the top-k still come back."""
    with SAG2Retriever.from_defaults(
        documents=ranked_corpus(), judge=OverlapJudge(), similarity_top_k=3
    ) as retriever:
        unfiltered = retriever.retrieve("alpha beta gamma")
        filtered = retriever.retrieve(
            SAG2QueryBundle("alpha beta gamma", filters=group_filter("b"))
        )
    assert {r.node.metadata["group"] for r in unfiltered} == {"a"}
    assert sorted(r.node.node_id for r in filtered) == ["b0", "b1"]


async def test_async_queries_apply_filters_too() -> None:
    """The async path filters exactly like the sync one."""
    with SAG2Retriever.from_defaults(
        documents=ranked_corpus(), judge=OverlapJudge(), similarity_top_k=3
    ) as retriever:
        query = SAG2QueryBundle("alpha beta gamma", filters=group_filter("b"))
        assert summary(await retriever.aretrieve(query)) == summary(retriever.retrieve(query))


def test_in_filter_allows_any_listed_value(retriever: SAG2Retriever) -> None:
    """IN keeps nodes whose value is one of the listed ones."""
    results = retriever.retrieve(SAG2QueryBundle(QUESTION, filters=group_filter("a", "c")))
    assert results and {r.node.metadata["group"] for r in results} == {"a"}


def test_retriever_filters_apply_to_every_query_and_combine_with_query_filters() -> None:
    """Constructor filters AND query filters: a key constrained twice keeps common values."""
    with SAG2Retriever.from_defaults(
        documents=corpus(), judge=OverlapJudge(), filters=group_filter("b")
    ) as retriever:
        assert {r.node.metadata["group"] for r in retriever.retrieve(QUESTION)} == {"b"}
        both = SAG2QueryBundle(QUESTION, filters=group_filter("a", "b"))
        assert {r.node.metadata["group"] for r in retriever.retrieve(both)} == {"b"}
        disjoint = SAG2QueryBundle(QUESTION, filters=group_filter("a"))
        assert retriever.retrieve(disjoint) == []


def test_filters_on_several_keys_must_all_hold(retriever: SAG2Retriever) -> None:
    """Two keys in one AND set both constrain the results."""
    filters = MetadataFilters(
        filters=[
            MetadataFilter(key="group", value="a"),
            MetadataFilter(key="title", value="Dijon"),
        ]
    )
    assert len(retriever.retrieve("Which city is in Burgundy?")) > 1
    results = retriever.retrieve(SAG2QueryBundle("Which city is in Burgundy?", filters=filters))
    assert [r.node.node_id for r in results] == ["dijon"]


def test_operators_conditions_and_nesting_map_onto_the_core_filters(
    retriever: SAG2Retriever,
) -> None:
    """NE, NIN, ranges, OR and nested groups select exactly the nodes the rule allows."""

    def groups(*items: MetadataFilter | MetadataFilters, condition: str = "and") -> set[str]:
        filters = MetadataFilters(filters=list(items), condition=FilterCondition(condition))
        found = retriever.retrieve(SAG2QueryBundle(QUESTION, filters=filters))
        return {r.node.metadata["group"] for r in found}

    everything = groups()
    assert len(everything) > 1
    assert groups(MetadataFilter(key="group", value="a", operator=FilterOperator.NE)) == (
        everything - {"a"}
    )
    assert groups(MetadataFilter(key="group", value=["a"], operator=FilterOperator.NIN)) == (
        everything - {"a"}
    )
    assert groups(
        MetadataFilter(key="group", value="a", operator=FilterOperator.GTE),
        MetadataFilter(key="group", value="a", operator=FilterOperator.LTE),
    ) == {"a"}
    assert groups(MetadataFilter(key="group", value="a", operator=FilterOperator.GT)) == (
        everything - {"a"}
    )
    assert groups(MetadataFilter(key="group", value="b", operator=FilterOperator.LT)) == {"a"}
    either = [MetadataFilter(key="group", value=g) for g in ("a", "b")]
    assert groups(*either, condition="or") == {"a", "b"} & everything
    nested = MetadataFilters(filters=either, condition=FilterCondition.OR)
    assert groups(nested, MetadataFilter(key="group", value="b", operator=FilterOperator.NE)) == (
        {"a"}
    )


def test_a_metadata_key_with_a_dot_is_matched_literally() -> None:
    """LlamaIndex keys are flat: "file.name" is one key, not a path into "file"."""
    documents = [
        Document(id_="x", text="Lighthouse keeper.", metadata={"file.name": "x.txt"}),
        Document(id_="y", text="Lighthouse keeper too.", metadata={"file": {"name": "x.txt"}}),
    ]
    filters = MetadataFilters(filters=[MetadataFilter(key="file.name", value="x.txt")])
    with SAG2Retriever.from_defaults(documents=documents, judge=OverlapJudge()) as retriever:
        found = retriever.retrieve(SAG2QueryBundle("lighthouse keeper", filters=filters))
    assert [r.node.node_id for r in found] == ["x"]


@pytest.mark.parametrize(
    "filters",
    [
        MetadataFilters(
            filters=[MetadataFilter(key="group", value="a")], condition=FilterCondition.NOT
        ),
        MetadataFilters(filters=[MetadataFilter(key="group", value=["a"])]),
        MetadataFilters(
            filters=[MetadataFilter(key="group", value="a", operator=FilterOperator.IN)]
        ),
        MetadataFilters(
            filters=[MetadataFilter(key="group", value="a", operator=FilterOperator.CONTAINS)]
        ),
        MetadataFilters(filters=[MetadataFilter(key='bad"key', value="a")]),
        MetadataFilters(filters=[MetadataFilter(key="year", value=float("nan"))]),
    ],
)
def test_unsupported_filters_raise_instead_of_post_filtering(
    retriever: SAG2Retriever, filters: MetadataFilters
) -> None:
    """Operators, conditions and keys SQLite cannot evaluate are refused with a clear error."""
    with pytest.raises(InvalidInputError):
        retriever.retrieve(SAG2QueryBundle(QUESTION, filters=filters))


def test_unsupported_retriever_filters_are_refused_at_construction() -> None:
    """A bad filter set is reported when the retriever is built, not at the first query."""
    filters = MetadataFilters(
        filters=[MetadataFilter(key="group", value="a", operator=FilterOperator.CONTAINS)]
    )
    with pytest.raises(InvalidInputError, match="CONTAINS"):
        SAG2Retriever.from_defaults(judge=OverlapJudge(), filters=filters)


# -- persistence ---------------------------------------------------------------------------


def test_persisting_over_a_directory_another_retriever_has_open_keeps_its_later_writes(
    tmp_path: Path,
) -> None:
    """Defect 8: the target file used to be replaced under the open connection, so the other
    retriever's later writes went to an unlinked file and were lost."""
    target = tmp_path / "shared"
    with SAG2Retriever.from_defaults(documents=corpus()[:2], judge=OverlapJudge()) as first:
        first.persist(target)
    opened = SAG2Retriever.from_persist_dir(target, judge=OverlapJudge())
    with SAG2Retriever.from_defaults(documents=corpus(), judge=OverlapJudge()) as second:
        second.persist(target)
    assert opened.sqlite_index.document_count() == len(corpus())
    opened.add_nodes([Document(id_="late", text="A late lighthouse note.")])
    opened.close()
    with SAG2Retriever.from_persist_dir(target, judge=OverlapJudge()) as reloaded:
        assert reloaded.sqlite_index.document_count() == len(corpus()) + 1
        assert reloaded.sqlite_index.document("late") is not None


def test_persisting_over_an_index_with_other_settings_is_refused(tmp_path: Path) -> None:
    """Defect 8: an open retriever would keep writing with its settings into a file whose meta
    says otherwise, so an index built differently is never overwritten."""
    target = tmp_path / "shared"
    with SAG2Retriever.from_defaults(documents=corpus(), judge=OverlapJudge()) as first:
        first.persist(target)
    other = IndexSettings(chunk_chars=500)
    with (
        SAG2Retriever.from_defaults(
            documents=corpus(), judge=OverlapJudge(), index_settings=other
        ) as second,
        pytest.raises(IndexSettingsMismatchError, match="other settings"),
    ):
        second.persist(target)
    with SAG2Retriever.from_persist_dir(target, judge=OverlapJudge()) as reloaded:
        assert reloaded.sqlite_index.settings == IndexSettings()


def test_persist_and_reload_return_identical_results(tmp_path: Path) -> None:
    """Every setting that changes results survives persist/from_persist_dir."""
    config = SAG2Config(hops=1, seeds_per_round=2, expansion_terms=5)
    original = SAG2Retriever.from_defaults(
        documents=[*corpus(), Document(id_="long", text=long_text())],
        judge=OverlapJudge(),
        similarity_top_k=4,
        config=config,
        index_settings=IndexSettings(chunk_chars=500),
        filters=group_filter("a", "b"),
        title_key="title",
    )
    before = summary(original.retrieve(QUESTION))
    original.persist(tmp_path / "saved")
    original.close()
    with SAG2Retriever.from_persist_dir(tmp_path / "saved", judge=OverlapJudge()) as reloaded:
        assert summary(reloaded.retrieve(QUESTION)) == before
        assert reloaded.config == config
        assert reloaded.similarity_top_k == 4
        assert reloaded.filters == group_filter("a", "b")
        assert reloaded.sqlite_index.settings.chunk_chars == 500


def test_reloading_with_another_judge_warns(tmp_path: Path, retriever: SAG2Retriever) -> None:
    """The judge is passed again on load; a different one is reported."""
    retriever.persist(tmp_path)
    with (
        pytest.warns(UserWarning, match="fake-overlap"),
        SAG2Retriever.from_persist_dir(tmp_path, judge=ScriptedJudge({})),
    ):
        pass


def test_persist_into_its_own_directory_keeps_working(tmp_path: Path) -> None:
    """A reloaded retriever can persist again in place, additions included."""
    with SAG2Retriever.from_defaults(documents=corpus(), judge=OverlapJudge()) as retriever:
        retriever.persist(tmp_path)
    with SAG2Retriever.from_persist_dir(tmp_path, judge=OverlapJudge()) as reloaded:
        reloaded.add_nodes([TextNode(id_="new", text="The okapi lives in the Ituri rainforest.")])
        reloaded.persist(tmp_path)
    with SAG2Retriever.from_persist_dir(tmp_path, judge=OverlapJudge()) as again:
        assert again.retrieve("Where does the okapi live?")[0].node.node_id == "new"


def test_from_persist_dir_without_settings_explains(tmp_path: Path) -> None:
    """A directory that persist did not write is refused with a pointer to the right method."""
    with pytest.raises(InvalidInputError, match="from_persist_path"):
        SAG2Retriever.from_persist_dir(tmp_path, judge=OverlapJudge())


def test_from_persist_path_opens_an_index_built_by_the_core(tmp_path: Path) -> None:
    """A bare index file (say, from `sag2 index`) serves as is; documents are their own source."""
    path = tmp_path / "corpus.sqlite"
    with SQLiteIndex(path) as index:
        index.add_documents(
            [CoreDocument("e", "Gustave Eiffel was born in Dijon.", "Gustave Eiffel")]
        )
    with SAG2Retriever.from_persist_path(path, judge=OverlapJudge()) as retriever:
        node = retriever.retrieve("Where was Gustave Eiffel born?")[0].node
        retriever.delete_ref_doc("e")
        assert retriever.sqlite_index.document_count() == 0
    assert isinstance(node, TextNode)
    assert source_id(node) == "e"
    assert node.metadata["title"] == "Gustave Eiffel"
    assert node.text == "Gustave Eiffel was born in Dijon."[node.start_char_idx : node.end_char_idx]


def test_from_persist_path_refuses_a_missing_file(tmp_path: Path) -> None:
    """A mistyped path is an error, not a new empty index."""
    with pytest.raises(IndexUnavailableError, match="no index file"):
        SAG2Retriever.from_persist_path(tmp_path / "missing.sqlite", judge=OverlapJudge())
    assert not (tmp_path / "missing.sqlite").exists()


def test_from_defaults_with_persist_path_adds_to_an_existing_file(tmp_path: Path) -> None:
    """persist_path opens the file when it exists and adds the given nodes to it."""
    path = tmp_path / "index.sqlite"
    SAG2Retriever.from_defaults(documents=corpus(), judge=OverlapJudge(), persist_path=path).close()
    extra = [TextNode(id_="new", text="The okapi lives in the Ituri rainforest.")]
    with SAG2Retriever.from_defaults(
        nodes=extra, judge=OverlapJudge(), persist_path=path
    ) as retriever:
        assert retriever.sqlite_index.document_count() == len(corpus()) + 1


def test_temporary_index_is_removed_on_close() -> None:
    """Without persist_path the index is a temporary file, deleted by close()."""
    retriever = SAG2Retriever.from_defaults(documents=corpus(), judge=OverlapJudge())
    path = retriever.sqlite_index.path
    assert path.exists()
    retriever.close()
    assert not path.parent.exists()


# -- construction sources ------------------------------------------------------------------


def test_builds_from_a_vector_store_index_docstore() -> None:
    """index= indexes the nodes in the index's docstore."""
    storage = StorageContext.from_defaults()
    index = VectorStoreIndex.from_documents(
        corpus(), storage_context=storage, embed_model=MockEmbedding(embed_dim=8)
    )
    with SAG2Retriever.from_defaults(index=index, judge=OverlapJudge()) as retriever:
        results = retriever.retrieve(QUESTION)
    sources = {source_id(r.node) for r in results}
    assert sources <= {doc.id_ for doc in corpus()}
    assert "eiffel" in sources


def test_builds_from_a_docstore() -> None:
    """docstore= indexes every node it holds."""
    docstore = SimpleDocumentStore()
    docstore.add_documents(corpus())
    with SAG2Retriever.from_defaults(docstore=docstore, judge=OverlapJudge()) as retriever:
        assert retriever.sqlite_index.document_count() == len(corpus())


def test_more_than_one_source_is_rejected() -> None:
    """Exactly what to index must be unambiguous."""
    with pytest.raises(InvalidInputError, match="at most one"):
        SAG2Retriever.from_defaults(nodes=corpus(), documents=corpus(), judge=OverlapJudge())


def test_default_judge_is_the_offline_local_judge() -> None:
    """judge=None means the default offline judge (the pool judge): no network, no API key."""
    with SAG2Retriever.from_defaults(documents=corpus()) as retriever:
        assert retriever.judge.identity.startswith("pool:")
        assert not retriever.judge.sends_data_off_machine


def test_lexical_fallback_reports_no_judge_score() -> None:
    """When the judge fails and the config allows BM25 order, judge_score is None."""

    def failing(*_: object) -> float:
        raise JudgeError("judge unavailable")

    with (
        SAG2Retriever.from_defaults(
            documents=corpus(),
            judge=ScriptedJudge(failing),
            config=SAG2Config(on_judge_error="bm25"),
        ) as retriever,
        pytest.warns(UserWarning, match="lexical order"),
    ):
        results = retriever.retrieve(QUESTION)
    assert results
    assert all(r.node.metadata["judge_score"] is None for r in results)


# -- query engine and prompts --------------------------------------------------------------


def test_query_engine_answers_from_sag2_nodes(retriever: SAG2Retriever) -> None:
    """RetrieverQueryEngine uses SAG2's nodes as the response's sources."""
    engine = RetrieverQueryEngine.from_args(retriever, llm=MockLLM())
    response = engine.query(QUESTION)
    expected = [r.node.node_id for r in retriever.retrieve(QUESTION)]
    assert [s.node.node_id for s in response.source_nodes] == expected
    assert str(response)


async def test_async_query_engine_answers_from_sag2_nodes(retriever: SAG2Retriever) -> None:
    """The async query path goes through aretrieve."""
    engine = RetrieverQueryEngine.from_args(retriever, llm=MockLLM())
    response = await engine.aquery(QUESTION)
    expected = [r.node.node_id for r in await retriever.aretrieve(QUESTION)]
    assert [s.node.node_id for s in response.source_nodes] == expected


def test_prompts_round_trip_and_reach_the_judge() -> None:
    """update_prompts changes the instruction the judge receives; get_prompts shows it."""
    judge = ScriptedJudge({}, default=0.5)
    with SAG2Retriever.from_defaults(documents=corpus(), judge=judge) as retriever:
        prompts = retriever.get_prompts()
        assert prompts["judge_instruction"].get_template() == DEFAULT_INSTRUCTION
        assert "judge_reassess_note" in prompts
        retriever.update_prompts({"judge_instruction": PromptTemplate("Only birthplaces count.")})
        assert (
            retriever.get_prompts()["judge_instruction"].get_template() == "Only birthplaces count."
        )
        assert retriever.config.instruction == "Only birthplaces count."
        retriever.retrieve(QUESTION)
    assert judge.requests
    assert {request.instruction for request in judge.requests} == {"Only birthplaces count."}


def test_prompt_with_template_variables_is_refused(retriever: SAG2Retriever) -> None:
    """The judge's texts are sent as is, so a {variable} would never be filled."""
    with pytest.raises(InvalidInputError, match="question"):
        retriever.update_prompts({"judge_instruction": PromptTemplate("Judge {question}.")})
