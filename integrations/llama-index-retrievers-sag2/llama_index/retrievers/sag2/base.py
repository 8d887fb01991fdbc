"""SAG2Retriever: SAG2 multi-hop retrieval as a LlamaIndex retriever over one SQLite file."""

from __future__ import annotations

import os
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.callbacks.base import CallbackManager
from llama_index.core.indices.base import BaseIndex
from llama_index.core.llms import LLM
from llama_index.core.prompts import BasePromptTemplate, PromptTemplate
from llama_index.core.prompts.mixin import PromptDictType
from llama_index.core.schema import BaseNode, Document, NodeWithScore, QueryBundle
from llama_index.core.storage.docstore.types import BaseDocumentStore
from llama_index.core.vector_stores.types import MetadataFilters

from sag2_retrievers import Document as CoreDocument
from sag2_retrievers import (
    DocumentIndex,
    Filters,
    IndexSettings,
    InvalidInputError,
    Judge,
    SAG2Config,
    SAG2Engine,
    SQLiteIndex,
)
from sag2_retrievers.adapter_kit import (
    AdapterIndex,
    AdapterSession,
    judge_or_local,
    open_index,
    write_and_prepare,
)

from .events import round_reporter
from .filters import to_core_filters
from .judge import as_judge
from .mapping import SOURCE_FILTER_KEY, to_core_documents, to_nodes
from .storage import INDEX_FILE, RetrieverSettings, copy_index, read_settings, write_settings

DEFAULT_TOP_K = 10
REOPEN = "open the index again with SAG2Retriever.from_persist_path(...)"
DEFAULT_TITLE_KEY = "title"
# Prompt keys exposed through get_prompts/update_prompts, and the SAG2Config field each sets.
PROMPT_FIELDS = {"judge_instruction": "instruction", "judge_reassess_note": "reassess_note"}


@dataclass
class SAG2QueryBundle(QueryBundle):
    """A query with its own MetadataFilters, AND-ed with the retriever's filters."""

    filters: MetadataFilters | None = None


class SAG2Retriever(BaseRetriever):
    """Multi-hop retrieval: BM25 candidates judged in context, expanded through shared terms.

    Every query runs SAG2's bounded rounds in the core engine and returns at most
    ``similarity_top_k`` nodes, one per indexed node, scored by the judge. Each result keeps
    its node's metadata (plus ``sag2_round``, ``sag2_rank`` and ``judge_score``), points at its
    source document through ``NodeRelationship.SOURCE``, and carries ``start_char_idx`` and
    ``end_char_idx`` in that document's text.

    Args:
        backend: the open SAG2 index: a `SQLiteIndex` (what `from_defaults` builds from
            nodes) or any other `DocumentIndex` backend, such as a `PostgresIndex`.
        judge: the evidence judge, or a LlamaIndex LLM (wrapped in `LlamaIndexLLMJudge`); None
            loads the offline local judge (no network, no key).
        config: SAG2 parameters; the judge's texts are also exposed as prompts.
        similarity_top_k: results per query (0 returns nothing and spends no judgment).
        filters: EQ/IN metadata filters, AND-ed, applied inside SQLite to every query; a
            `SAG2QueryBundle` adds filters for one query.
        title_key: the metadata key whose string value is indexed as the node's title;
            without one, a markdown ``# H1`` of the text, else the file name, is the title.
        allow_remote_judges: False refuses judges that send text off the machine.
        skip_empty: True skips blank nodes with one warning; False raises instead.
        precompute_judge: True lets the judge prepare passages at ingest, for judges with
            passage-side work (the local pool judge has none).
        units_per_document: how many chunks of one indexed node may be returned (sets
            ``SAG2Config.units_per_document``); None keeps the config's, by default 1 (the
            paper's unique sources).
        verbose: print each round's trace (seeds, terms, judgments) as it completes.

    Each round also dispatches a `SAG2RoundEvent` to LlamaIndex instrumentation as soon as
    it is scored, inside the retrieval's span; an LLM judge's calls are LLM events there too.
    """

    def __init__(
        self,
        backend: DocumentIndex,
        judge: Judge | LLM | None = None,
        config: SAG2Config | None = None,
        *,
        similarity_top_k: int = DEFAULT_TOP_K,
        filters: MetadataFilters | None = None,
        title_key: str | None = DEFAULT_TITLE_KEY,
        allow_remote_judges: bool | None = None,
        callback_manager: CallbackManager | None = None,
        verbose: bool = False,
        skip_empty: bool = True,
        precompute_judge: bool = True,
        units_per_document: int | None = None,
    ) -> None:
        """Wrap an open index; ``judge=None`` uses the offline local judge."""
        if units_per_document is not None:
            config = (config or SAG2Config()).with_changes(units_per_document=units_per_document)
        _check_top_k(similarity_top_k)
        to_core_filters(filters)
        self.similarity_top_k = similarity_top_k
        self.filters = filters
        self.title_key = title_key
        self.skip_empty = skip_empty
        self.precompute_judge = precompute_judge
        engine = SAG2Engine(
            backend,
            judge_or_local(as_judge(judge)),
            config,
            allow_remote_judges=allow_remote_judges,
        )
        self._session = AdapterSession(AdapterIndex(backend), engine, REOPEN)
        super().__init__(callback_manager=callback_manager, verbose=verbose)

    def __repr__(self) -> str:
        return (
            f"SAG2Retriever(index={self.index!r}, judge={self.judge.identity!r}, "
            f"similarity_top_k={self.similarity_top_k})"
        )

    # -- construction ----------------------------------------------------------------------

    @classmethod
    def from_defaults(
        cls,
        nodes: Sequence[BaseNode] | None = None,
        documents: Sequence[Document] | None = None,
        index: BaseIndex[Any] | None = None,
        docstore: BaseDocumentStore | None = None,
        judge: Judge | LLM | None = None,
        similarity_top_k: int = DEFAULT_TOP_K,
        persist_path: str | os.PathLike[str] | None = None,
        config: SAG2Config | None = None,
        *,
        index_settings: IndexSettings | None = None,
        filters: MetadataFilters | None = None,
        title_key: str | None = DEFAULT_TITLE_KEY,
        allow_remote_judges: bool | None = None,
        callback_manager: CallbackManager | None = None,
        verbose: bool = False,
        skip_empty: bool = True,
        precompute_judge: bool = True,
        units_per_document: int | None = None,
        backend: DocumentIndex | None = None,
    ) -> SAG2Retriever:
        """Index nodes, documents, an index's docstore or a docstore (at most one of them).

        With ``persist_path`` the SQLite file is created there (its folder must exist), or
        opened and added to if it exists. Without it, the index lives in a temporary file
        removed with the retriever; keep it with `persist`. ``backend`` uses an open index
        instead (for example ``PostgresIndex(dsn)``); it excludes ``persist_path`` and
        ``index_settings``, and the retriever owns it (`close` closes it). Running the same
        ingest again upserts: random node ids are replaced by stable ones (see `add_nodes`).
        """
        sources = _source_nodes(nodes, documents, index, docstore)
        batch = to_core_documents(sources, title_key, skip_empty=skip_empty)
        opened = open_index(
            backend,
            persist_path,
            index_settings,
            path_argument="persist_path",
            file_name=INDEX_FILE,
        )
        try:
            retriever = cls(
                opened.index,
                judge,
                config,
                similarity_top_k=similarity_top_k,
                filters=filters,
                title_key=title_key,
                allow_remote_judges=allow_remote_judges,
                callback_manager=callback_manager,
                verbose=verbose,
                skip_empty=skip_empty,
                precompute_judge=precompute_judge,
                units_per_document=units_per_document,
            )
            retriever._session.opened = opened
            retriever._write(batch)
        except BaseException:
            if backend is None:  # the caller's own backend stays open and theirs to close
                opened.release()
                opened.remove_if_created()  # a failed first ingest leaves no empty index
            raise
        return retriever

    @classmethod
    def from_persist_path(
        cls,
        persist_path: str | os.PathLike[str],
        judge: Judge | LLM | None = None,
        config: SAG2Config | None = None,
        *,
        similarity_top_k: int = DEFAULT_TOP_K,
        filters: MetadataFilters | None = None,
        title_key: str | None = DEFAULT_TITLE_KEY,
        allow_remote_judges: bool | None = None,
        callback_manager: CallbackManager | None = None,
        verbose: bool = False,
    ) -> SAG2Retriever:
        """Open an existing index file (one built by `sag2 index`, say), keeping its settings.

        A missing file raises IndexUnavailableError instead of creating an empty index.
        """
        return cls(
            SQLiteIndex(persist_path, create=False),
            judge,
            config,
            similarity_top_k=similarity_top_k,
            filters=filters,
            title_key=title_key,
            allow_remote_judges=allow_remote_judges,
            callback_manager=callback_manager,
            verbose=verbose,
        )

    @classmethod
    def from_persist_dir(
        cls,
        persist_dir: str | os.PathLike[str],
        judge: Judge | LLM | None = None,
        *,
        allow_remote_judges: bool | None = None,
        callback_manager: CallbackManager | None = None,
        verbose: bool = False,
    ) -> SAG2Retriever:
        """Reopen a retriever saved by `persist`, in place, with every saved setting.

        The judge cannot be saved: pass it again. A warning says so when its identity differs
        from the saved one, since scores would differ. Later additions write to this directory.
        """
        directory = Path(persist_dir)
        settings = read_settings(directory)
        retriever = cls.from_persist_path(
            directory / INDEX_FILE,
            judge,
            settings.config,
            similarity_top_k=settings.similarity_top_k,
            filters=settings.filters,
            title_key=settings.title_key,
            allow_remote_judges=allow_remote_judges,
            callback_manager=callback_manager,
            verbose=verbose,
        )
        if retriever.judge.identity != settings.judge_identity:
            warnings.warn(
                f"{directory} was persisted with judge {settings.judge_identity!r}, and is now "
                f"used with {retriever.judge.identity!r}; its results will differ",
                UserWarning,
                stacklevel=2,
            )
        return retriever

    def persist(self, persist_dir: str | os.PathLike[str]) -> None:
        """Save the index file and every setting that changes results into ``persist_dir``."""
        directory = Path(persist_dir)
        directory.mkdir(parents=True, exist_ok=True)
        copy_index(self.sqlite_index.path, directory / INDEX_FILE)
        settings = RetrieverSettings(
            self.config, self.similarity_top_k, self.filters, self.title_key, self.judge.identity
        )
        write_settings(directory, settings)

    # -- the parts ---------------------------------------------------------------------------

    @property
    def engine(self) -> SAG2Engine:
        """The core engine that runs every retrieval."""
        return self._session.engine

    @property
    def index(self) -> DocumentIndex:
        """The index the retriever searches (a `SQLiteIndex` unless another was given)."""
        # The engine holds a LexicalBackend; this retriever is always given a DocumentIndex.
        return cast(DocumentIndex, self._session.engine.index)

    @property
    def sqlite_index(self) -> SQLiteIndex:
        """The SQLite index the retriever searches (an error for another backend)."""
        index = self.index
        if not isinstance(index, SQLiteIndex):
            raise InvalidInputError(f"this retriever searches {index!r}, not an SQLite file")
        return index

    @property
    def judge(self) -> Judge:
        """The evidence judge scoring candidates."""
        return self._session.engine.judge

    @property
    def config(self) -> SAG2Config:
        """The SAG2 parameters (change the judge's texts with `update_prompts`)."""
        return self._session.engine.config

    # -- changing the index ------------------------------------------------------------------

    def add_nodes(self, nodes: Sequence[BaseNode]) -> None:
        """Index nodes now, replacing any with the same id; one transaction.

        A node keeps its id unless it is a random UUID4 (LlamaIndex's default), which is
        replaced by its ``file_path`` with its page when it has one (``<path>#page_label=2``,
        ``_part_<i>`` added when several nodes share that), else a hash of its text and
        metadata. Blank nodes are skipped with one warning.
        """
        self._write(to_core_documents(nodes, self.title_key, skip_empty=self.skip_empty))

    def _write(self, batch: Sequence[CoreDocument]) -> None:
        """Write the documents of a converted batch the index does not hold unchanged and let
        the judge prepare those (if enabled): a re-run of the same files writes nothing."""
        write_and_prepare(self.index, self.judge, batch, prepare=self.precompute_judge)

    def add_documents(self, documents: Sequence[Document]) -> None:
        """Index whole LlamaIndex documents (SAG2 chunks long ones); same as `add_nodes`."""
        self.add_nodes(documents)

    def delete_nodes(self, node_ids: Sequence[str]) -> None:
        """Remove indexed nodes by node id; unknown ids are ignored."""
        self.index.delete(node_ids)

    def delete_ref_doc(self, ref_doc_id: str) -> None:
        """Remove every node that came from the source document ``ref_doc_id``: its own id,
        or for a document with a random id the stable one it was stored under (its file path,
        the ``ref_doc_id`` the retrieved nodes carry)."""
        index = self.index
        unit_ids = index.allowed_units({SOURCE_FILTER_KEY: ref_doc_id})
        node_ids = {unit.doc_id for unit in index.units(unit_ids).values()}
        # A document indexed without this adapter is its own source: its id is ref_doc_id.
        index.delete([ref_doc_id, *sorted(node_ids)])

    # -- retrieval -----------------------------------------------------------------------------

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        """Run SAG2 for the query (blocking) and return its hits as nodes."""
        filters = self._filters(query_bundle)
        if self.similarity_top_k == 0:
            return []
        result = self._session.open_engine().retrieve(
            query_bundle.query_str,
            self.similarity_top_k,
            filters=filters,
            on_round=round_reporter(self.index, self._verbose),
        )
        return to_nodes(result, self.title_key)

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        """Run SAG2 without blocking the event loop (SQLite in threads, the judge awaited)."""
        filters = self._filters(query_bundle)
        if self.similarity_top_k == 0:
            return []
        result = await self._session.open_engine().aretrieve(
            query_bundle.query_str,
            self.similarity_top_k,
            filters=filters,
            on_round=round_reporter(self.index, self._verbose),
        )
        return to_nodes(result, self.title_key)

    def _filters(self, query_bundle: QueryBundle) -> Filters | None:
        """The retriever's filters AND the query's own (from a SAG2QueryBundle)."""
        query_filters = query_bundle.filters if isinstance(query_bundle, SAG2QueryBundle) else None
        return to_core_filters(self.filters, query_filters)

    # -- prompts -------------------------------------------------------------------------------

    def _get_prompts(self) -> PromptDictType:
        """The judge's instruction and final-round note, as fixed-text prompt templates."""
        return {
            key: PromptTemplate(getattr(self.config, field)) for key, field in PROMPT_FIELDS.items()
        }

    def _update_prompts(self, prompts_dict: PromptDictType) -> None:
        """Replace the judge's instruction or note; other keys are left to other modules."""
        changes = {
            field: _fixed_text(key, prompts_dict[key])
            for key, field in PROMPT_FIELDS.items()
            if key in prompts_dict
        }
        if changes:
            self._session.engine.config = self.config.with_changes(**changes)

    # -- resources -----------------------------------------------------------------------------

    def close(self) -> None:
        """Release the judge, the engine's loop thread, the index and any temporary file."""
        self._session.close()

    async def aclose(self) -> None:
        """Async `close`, for use inside an event loop."""
        await self._session.aclose()

    def __enter__(self) -> SAG2Retriever:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def _check_top_k(similarity_top_k: object) -> None:
    """Reject a similarity_top_k that is not a non-negative integer."""
    if not isinstance(similarity_top_k, int) or isinstance(similarity_top_k, bool):
        raise InvalidInputError(f"similarity_top_k must be an integer, got {similarity_top_k!r}")
    if similarity_top_k < 0:
        raise InvalidInputError(f"similarity_top_k must be >= 0, got {similarity_top_k}")


def _source_nodes(
    nodes: Sequence[BaseNode] | None,
    documents: Sequence[Document] | None,
    index: BaseIndex[Any] | None,
    docstore: BaseDocumentStore | None,
) -> list[BaseNode]:
    """The nodes to index from whichever single source was given (none: nothing to add)."""
    sources = {"nodes": nodes, "documents": documents, "index": index, "docstore": docstore}
    given = [name for name, value in sources.items() if value is not None]
    if len(given) > 1:
        raise InvalidInputError(
            f"pass at most one of nodes, documents, index or docstore, got {', '.join(given)}"
        )
    if index is not None:
        docstore = index.docstore
        if not docstore.docs:
            raise InvalidInputError(
                "the index's docstore holds no nodes (its vector store keeps the text); "
                "pass nodes= instead"
            )
    if docstore is not None:
        return list(docstore.docs.values())
    return [*(nodes or ()), *(documents or ())]


def _fixed_text(key: str, prompt: BasePromptTemplate) -> str:
    """A prompt's text, refusing template variables: the judge's texts are never formatted."""
    text = prompt.get_template()
    if prompt.template_vars:
        raise InvalidInputError(
            f"prompt {key!r} is fixed text sent to the judge as is; it must not contain "
            f"template variables, found {', '.join(prompt.template_vars)}"
        )
    return text
