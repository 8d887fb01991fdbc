"""SAG2Retriever: LangChain's face of SAG2 multi-hop retrieval over one SQLite file."""

from __future__ import annotations

import asyncio
import os
import warnings
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from langchain_core.callbacks import (
    AsyncCallbackManagerForRetrieverRun,
    CallbackManagerForRetrieverRun,
)
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from pydantic import ConfigDict, Field, PrivateAttr, field_validator, model_validator

from sag2_retrievers import (
    DocumentIndex,
    Filters,
    IndexSettings,
    InvalidInputError,
    Judge,
    RoundTrace,
    SAG2Config,
    SAG2Engine,
)
from sag2_retrievers.adapter_kit import (
    AdapterSession,
    judge_or_local,
    open_index,
    write_and_prepare,
)

from .events import result_report, round_report
from .judge_choice import as_judge, judge_callbacks
from .mapping import to_documents, to_source_documents

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel

REOPEN = "open the index file again with SAG2Retriever(db_path=..., judge=...)"


class SAG2Retriever(BaseRetriever):
    """SAG2 multi-hop retriever: BM25 candidates in SQLite, judged and expanded over rounds.

    Each query runs the SAG2 rounds of ``sag2-retrievers``: BM25 candidates from one SQLite
    FTS5 file, a yes/no evidence judge, and passage-term-passage expansion, returning up to
    ``k`` source documents. Documents are stored whole and split into chunks near 2,200
    characters; a result's ``page_content`` is the best chunk of its source document. Each
    round is reported to the run's callbacks as soon as it is scored: one ``on_text`` line and
    one ``sag2_round`` custom event, then a ``sag2_result`` event at the end. A chat model
    judge's calls appear as child runs of the retrieval. Unknown constructor arguments
    (``search_kwargs=``, ``llm=``, typos) are refused.

    Setup:
        Install ``langchain-sag2`` from a checkout (the names are not on PyPI yet). With
        ``judge=None`` the retriever uses the offline pool judge (numpy only); any other judge
        can be passed in.

        ```bash
        pip install -e . -e ./integrations/langchain-sag2
        ```

    Key init args:
        k: int
            Number of source documents to return (default 10); ``invoke(query, k=3)``
            overrides it for one call.
        judge: sag2_retrievers.judges.Judge | BaseChatModel | None
            The evidence judge. A LangChain chat model is wrapped in ``LangChainJudge``.
            ``None`` builds the offline local (pool) judge, which writes nothing to the index.
        config: SAG2Config
            Retrieval parameters (rounds, pool sizes, ...), the paper's defaults.
        db_path: str | Path | None
            The SQLite index file, created if missing (its folder must exist) and reopened
            if present. ``None`` makes a temporary file, deleted by ``close()`` or when the
            retriever is garbage-collected.
        create: bool
            ``False`` opens ``db_path`` only if it already holds an index, so a mistyped
            path raises ``IndexUnavailableError`` instead of creating an empty index.
        index_settings: IndexSettings | None
            Settings for a new file (chunk size); ``None`` adopts an existing file's.
        title_key: str | None
            Metadata key whose string value becomes the document title (default
            ``"title"``); without one, a markdown ``# H1`` of the text, else the file name
            in ``source``. Titles are searched and shown to the judge.
        skip_empty: bool
            Blank documents are skipped with one warning naming them (default); ``False``
            raises instead.
        precompute_judge: bool
            Let the judge prepare passages as they are added, for judges with passage-side
            work (default ``True``; the local pool judge has none).
        units_per_document: int | None
            How many chunks of one source document may be among the ``k`` results (sets
            ``config.units_per_document``); ``None`` keeps the config's, by default 1 (the
            paper's unique sources). Chunks of one document share its ``id``; their
            ``start_index`` tells them apart.

    Instantiate:
        ```python
        from langchain_sag2 import SAG2Retriever
        from sag2_retrievers.judges import OverlapJudge

        retriever = SAG2Retriever.from_texts(
            [
                "Gustave Eiffel was born in Dijon in 1832.",
                "The Eiffel Tower was designed by the company of Gustave Eiffel.",
            ],
            metadatas=[{"title": "Gustave Eiffel"}, {"title": "Eiffel Tower"}],
            db_path="eiffel.sqlite",
            judge=OverlapJudge(),  # a deterministic test judge; omit for the local judge
            k=2,
        )
        # Later, or in another process (create=False: a mistyped path raises):
        retriever = SAG2Retriever(db_path="eiffel.sqlite", judge=OverlapJudge(), create=False)
        ```

    Usage:
        ```python
        docs = retriever.invoke("Where was the designer of the Eiffel Tower born?")
        docs[0].id, docs[0].metadata["score"], docs[0].metadata["start_index"]
        retriever.invoke("Who designed the tower?", k=1, filter={"title": "Eiffel Tower"})
        retriever.invoke("Who designed it?", filter={"$or": [{"lang": "fr"}, {"n": {"$lt": 3}}]})
        ```

        ``filter`` takes a flat mapping (``{"lang": "fr"}``, a list meaning any of) or the
        Chroma/PGVector dialect (``$eq $ne $gt $gte $lt $lte $in $nin``, ``$and``, ``$or``),
        evaluated inside SQLite before ranking; see ``sag2_retrievers.filters``.

        Each result's ``metadata`` is ``title`` (the title searched, unless the stored metadata
        has one), the stored metadata, and ``score`` (the judge's
        probability), ``doc_id``, ``start_index`` / ``end_index`` (offsets of
        ``page_content`` in the source text), ``sag2_round`` (0 = initial BM25 list),
        ``sag2_position`` (1-based place in the returned list: 1, 2, 3, ...) and ``sag2_rank``
        (1-based rank among every chunk judged, so with one chunk per document it can skip:
        1, 2, 13, ...). These keys override stored metadata of the same name.

    Use within a chain:
        ```python
        from langchain_core.output_parsers import StrOutputParser
        from langchain_core.prompts import ChatPromptTemplate
        from langchain_core.runnables import RunnablePassthrough

        prompt = ChatPromptTemplate.from_template(
            "Answer using only the context.\\n\\nContext: {context}\\n\\nQuestion: {question}"
        )


        def format_docs(docs):
            return "\\n\\n".join(doc.page_content for doc in docs)


        chain = (
            {"context": retriever | format_docs, "question": RunnablePassthrough()}
            | prompt
            | llm
            | StrOutputParser()
        )
        chain.invoke("Where was the designer of the Eiffel Tower born?")
        ```
    """

    model_config = ConfigDict(arbitrary_types_allowed=True, extra="forbid")

    k: int = Field(default=10, ge=0)
    """Number of source documents to return; ``invoke(query, k=...)`` overrides it."""
    judge: Judge | None = None
    """The evidence judge (a chat model is wrapped in ``LangChainJudge``); ``None`` builds the
    offline local judge at construction."""
    config: SAG2Config = Field(default_factory=SAG2Config, repr=False)
    """Retrieval parameters; the paper's defaults."""
    db_path: Path | None = None
    """The SQLite index file; ``None`` creates a temporary one (set here after construction)."""
    index_settings: IndexSettings | None = None
    """Settings for a new index file; ``None`` adopts those stored in an existing file."""
    title_key: str | None = "title"
    """Metadata key whose string value is stored as the document's title."""
    allow_remote_judges: bool | None = None
    """Refuse judges that send text off the machine when False (None: environment decides)."""
    create: bool = True
    """False: ``db_path`` must already hold an index (a typo raises instead of creating one)."""
    skip_empty: bool = True
    """Skip blank documents with one warning (True) or raise (False)."""
    precompute_judge: bool = True
    """Let the judge prepare the passages of added documents (judges with passage work)."""
    units_per_document: int | None = Field(default=None, ge=1)
    """Chunks of one source document allowed among the results (None: the config's, 1)."""
    backend: DocumentIndex | None = Field(default=None, repr=False)
    """An open index to use instead of an SQLite file (for example ``PostgresIndex(dsn)``);
    it excludes ``db_path`` and ``index_settings``. The retriever owns it: ``close`` closes it."""

    @model_validator(mode="before")
    @classmethod
    def _known_fields_only(cls, data: Any) -> Any:
        """Refuse misspelt or foreign arguments (``search_kwargs=``, ``llm=``) by name."""
        if isinstance(data, Mapping):
            known = set(cls.model_fields) | {
                field.alias for field in cls.model_fields.values() if field.alias
            }
            unknown = sorted(str(key) for key in data if key not in known)
            if unknown:
                raise ValueError(
                    f"SAG2Retriever got unknown argument(s) {', '.join(unknown)}; it accepts "
                    f"{', '.join(sorted(cls.model_fields))} (the number of results is k=..., "
                    "and a chat model is passed as judge=...)"
                )
        return data

    @field_validator("judge", mode="before")
    @classmethod
    def _wrap_chat_model(cls, judge: Any) -> Judge | None:
        """A LangChain chat model given as the judge is wrapped in a LangChainJudge."""
        return as_judge(judge)

    _session: AdapterSession = PrivateAttr()

    def model_post_init(self, context: Any, /) -> None:
        """Open or create the index file, build the default judge if needed, start the engine."""
        super().model_post_init(context)
        if self.units_per_document is not None:
            self.config = self.config.with_changes(units_per_document=self.units_per_document)
        opened = open_index(
            self.backend,
            self.db_path,
            self.index_settings,
            create=self.create,
            path_argument="db_path",
            file_name="index.sqlite",
        )
        if self.backend is None:
            self.db_path = opened.path
        try:
            self.judge = judge_or_local(self.judge)
            engine = SAG2Engine(
                opened.index, self.judge, self.config, allow_remote_judges=self.allow_remote_judges
            )
        except BaseException:
            opened.release()
            raise
        self._session = AdapterSession(opened, engine, REOPEN)

    # -- construction ----------------------------------------------------------------------

    @classmethod
    def from_texts(
        cls,
        texts: Iterable[str],
        metadatas: Iterable[Mapping[str, Any]] | None = None,
        ids: Sequence[str] | None = None,
        *,
        db_path: str | os.PathLike[str] | None = None,
        judge: Judge | BaseChatModel | None = None,
        **kwargs: Any,
    ) -> SAG2Retriever:
        """Index one document per text (with optional metadata and ids) and return a retriever."""
        text_list = list(texts)
        metadata_list = [{}] * len(text_list) if metadatas is None else list(metadatas)
        if len(metadata_list) != len(text_list):
            raise InvalidInputError(
                f"got {len(metadata_list)} metadatas for {len(text_list)} texts; "
                "pass one metadata mapping per text"
            )
        documents = [
            Document(page_content=text, metadata=dict(metadata))
            for text, metadata in zip(text_list, metadata_list, strict=True)
        ]
        return cls.from_documents(documents, ids, db_path=db_path, judge=judge, **kwargs)

    @classmethod
    def from_documents(
        cls,
        documents: Iterable[Document],
        ids: Sequence[str] | None = None,
        *,
        db_path: str | os.PathLike[str] | None = None,
        judge: Judge | BaseChatModel | None = None,
        **kwargs: Any,
    ) -> SAG2Retriever:
        """Index LangChain documents (upserting by id) and return a retriever over them.

        When this call created the index file and the ingest fails, the file is removed.
        """
        path = None if db_path is None else Path(db_path)
        documents = list(documents)
        if not documents:
            warnings.warn(
                "SAG2Retriever.from_documents got no documents: the index is empty until "
                "add_documents is called",
                UserWarning,
                stacklevel=2,
            )
        retriever = cls(db_path=path, judge=as_judge(judge), **kwargs)
        try:
            retriever.add_documents(documents, ids)
        except BaseException:
            retriever.close()
            retriever._session.opened.remove_if_created()
            raise
        return retriever

    # -- documents -------------------------------------------------------------------------

    @property
    def index(self) -> DocumentIndex:
        """The underlying index, for stats, ``optimize()`` or reading stored documents."""
        self._session.open_engine()
        return self._session.opened.index

    def add_documents(
        self, documents: Iterable[Document], ids: Sequence[str] | None = None
    ) -> list[str]:
        """Insert or replace documents by id in one transaction; returns the stored ids.

        The id is ``ids[i]`` if given, else ``document.id``, else the file path in
        ``metadata["source"]`` with its page, row or chunk start when given
        (``<path>#page=3``; ``_part_<i>`` added when several documents share that id), else a
        hash of the text and metadata, so re-adding the same files changes nothing.
        Blank documents are skipped with one warning and exact repeats stored once; neither
        adds an id to the result. Documents stored already unchanged are not rewritten.
        """
        index = self.index
        batch = to_source_documents(
            list(documents), ids, self.title_key, skip_empty=self.skip_empty
        )
        assert self.judge is not None  # set at construction
        write_and_prepare(index, self.judge, batch, prepare=self.precompute_judge)
        return [document.id for document in batch]

    def delete(self, ids: Iterable[str]) -> int:
        """Delete documents (with all their chunks) by id; returns how many were stored."""
        removed: int = self.index.delete(ids)
        return removed

    # -- retrieval -------------------------------------------------------------------------

    def _get_relevant_documents(
        self,
        query: str,
        *,
        run_manager: CallbackManagerForRetrieverRun,
        k: int | None = None,
        filter: Filters | None = None,
        **unknown: Any,
    ) -> list[Document]:
        """Run SAG2 on the engine's loop thread, reporting each round as it completes."""
        _refuse_unknown_options(unknown)
        engine = self._session.open_engine()
        reporting = bool(run_manager.handlers or run_manager.inheritable_handlers)
        events = run_manager.get_child()

        async def report_round(trace: RoundTrace) -> None:
            # On the engine's loop thread, which other retrievals share: SQLite goes to a worker.
            sources = await asyncio.to_thread(self._unit_sources, [trace])
            name, text, data = round_report(trace, sources)
            run_manager.on_text(text)
            events.on_custom_event(name, data, run_id=run_manager.run_id)

        with judge_callbacks(events):
            result = engine.retrieve(
                query,
                self.k if k is None else k,
                filters=filter,
                on_round=report_round if reporting else None,
            )
        if reporting:
            name, text, data = result_report(result)
            run_manager.on_text(text)
            events.on_custom_event(name, data, run_id=run_manager.run_id)
        return to_documents(result)

    async def _aget_relevant_documents(
        self,
        query: str,
        *,
        run_manager: AsyncCallbackManagerForRetrieverRun,
        k: int | None = None,
        filter: Filters | None = None,
        **unknown: Any,
    ) -> list[Document]:
        """Run SAG2 on the caller's event loop, reporting each round as it completes."""
        _refuse_unknown_options(unknown)
        engine = self._session.open_engine()
        reporting = bool(run_manager.handlers or run_manager.inheritable_handlers)
        events = run_manager.get_child()

        async def report_round(trace: RoundTrace) -> None:
            sources = await asyncio.to_thread(self._unit_sources, [trace])
            name, text, data = round_report(trace, sources)
            await run_manager.on_text(text)
            await events.on_custom_event(name, data, run_id=run_manager.run_id)

        with judge_callbacks(events):
            result = await engine.aretrieve(
                query,
                self.k if k is None else k,
                filters=filter,
                on_round=report_round if reporting else None,
            )
        if reporting:
            name, text, data = result_report(result)
            await run_manager.on_text(text)
            await events.on_custom_event(name, data, run_id=run_manager.run_id)
        return to_documents(result)

    def _unit_sources(self, traces: Sequence[RoundTrace]) -> dict[int, str]:
        """The source document id of every unit the rounds name as seeds or new candidates."""
        unit_ids = {u for trace in traces for u in (*trace.seeds, *trace.new_candidates)}
        units = self._session.opened.index.units(unit_ids)
        return {unit_id: unit.doc_id for unit_id, unit in units.items()}

    # -- lifecycle -------------------------------------------------------------------------

    def close(self) -> None:
        """Close the engine and its judge and the index; delete a temporary index file."""
        self._session.close()

    async def aclose(self) -> None:
        """Async ``close``: the judge is closed on the running event loop."""
        await self._session.aclose()

    def __enter__(self) -> SAG2Retriever:
        """Use the retriever in a ``with`` block that closes it."""
        return self

    def __exit__(self, *exc_info: object) -> None:
        """Close on leaving the ``with`` block."""
        self.close()

    async def __aenter__(self) -> SAG2Retriever:
        """Use the retriever in an ``async with`` block that closes it."""
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        """Close on leaving the ``async with`` block."""
        await self.aclose()


def _refuse_unknown_options(unknown: Mapping[str, Any]) -> None:
    """Name a misspelt invoke option in words the caller wrote (not a private method's)."""
    if unknown:
        raise TypeError(
            f"SAG2Retriever.invoke got unknown option(s) {', '.join(map(repr, unknown))}; "
            "it takes k and filter (and LangChain's config)"
        )
