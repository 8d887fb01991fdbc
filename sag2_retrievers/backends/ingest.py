"""Turning documents into index rows: chunking and analysis, in parallel when the batch is big."""

from __future__ import annotations

import contextlib
import gc
import multiprocessing
import os
import threading
import zlib
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import BrokenExecutor, Executor, Future, ProcessPoolExecutor
from concurrent.futures import TimeoutError as WaitTimeout  # not the builtin before 3.11
from dataclasses import dataclass
from typing import Any, Generic, NamedTuple, Protocol, TypeVar

from ..analysis import Profile, body_tokens, tokenize
from ..documents import Document, chunk_spans, validated_batch
from ..errors import IngestError
from ..markdown import find_headings, unit_heading
from ..settings import IndexSettings

PARALLEL_MIN_CHARS = 400_000
PARENT_CHECK_SECONDS = 1.0
# A worker that analyses slower than this (jieba does about 190,000 Han characters a
# second here) is taken to be stuck: no wait in ingest is unbounded.
ANALYSIS_GRACE_SECONDS = 60.0
ANALYSIS_MIN_CHARS_PER_SECOND = 5_000
# Workers run this much nicer than the writer: the writer is the pipeline's one serial leg,
# and with as many workers as cores it would get only a share of a core (100k build: 16.3 s
# against 24.6 s, side by side; docs/benchmarks.md, issue 35 round two).
WORKER_NICENESS = 5

StatisticsT = TypeVar("StatisticsT")


class PreparedUnit(NamedTuple):
    """One unit ready to write: offsets, heading path and FTS token streams.

    Expansion units are not among them: they are derived from the unit's text when needed
    (`base.sentence_expansion_units`), so the index does not store them. A tuple, so a batch
    crosses from a worker as plain tuples (`PreparedBatch.__reduce__`).
    """

    char_start: int
    char_end: int
    heading: str
    title_tokens: str
    heading_tokens: str
    body_tokens: str


@dataclass(frozen=True)
class PreparedDocument:
    """What analysis adds to a document: its prepared units.

    The document itself stays with the caller, so worker processes never send its text back.
    """

    units: tuple[PreparedUnit, ...]


@dataclass(frozen=True)
class PreparedBatch(Generic[StatisticsT]):
    """A batch's prepared documents (in order) and the statistics its backend derives from
    their units (units numbered in document order)."""

    documents: list[PreparedDocument]
    statistics: StatisticsT

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickled as plain tuples of unit fields, about a third of the cost of pickling
        an object per unit and per document on each side of a worker's pipe."""
        units = [tuple(map(tuple, document.units)) for document in self.documents]
        return _rebuilt_batch, (units, self.statistics)


def _rebuilt_batch(
    units: list[tuple[tuple[Any, ...], ...]], statistics: StatisticsT
) -> PreparedBatch[StatisticsT]:
    """A `PreparedBatch` from its pickled form (`PreparedBatch.__reduce__`)."""
    documents = [PreparedDocument(tuple(map(PreparedUnit._make, rows))) for rows in units]
    return PreparedBatch(documents, statistics)


# A unit's title, heading and body tokens: what its statistics are counted from.
UnitTokens = tuple[Sequence[str], Sequence[str], Sequence[str]]


class UnitStatistics(Protocol[StatisticsT]):
    """How a backend derives the statistics it stores from a run of analysed units.

    It runs in the analysis workers, beside the analysis, so the writer only adds slices up;
    an instance is sent to them, so its class must be importable (a module-level class).
    """

    def derive(self, units: Sequence[UnitTokens]) -> StatisticsT:
        """The statistics of consecutive units, from their token lists (the analysis's
        own, so the token texts are not split again)."""
        ...

    def merge(self, parts: Sequence[StatisticsT]) -> StatisticsT:
        """One batch's statistics from those of its consecutive slices, in order."""
        ...


def start_preparing(
    documents: Sequence[Document],
    settings: IndexSettings,
    statistics: UnitStatistics[StatisticsT],
    executor: Executor | None,
) -> Callable[[], PreparedBatch[StatisticsT]]:
    """Start analysing a batch (in the background when worthwhile); call the result to wait.

    Large batches are split over the worker processes at once, so the caller can write the
    previous batch to SQLite while this one is analysed.
    """
    # Workers get only titles, headings and texts: metadata is already serialised and stays.
    texts = [(doc.title, doc.heading, doc.text) for doc in documents]
    chunk_chars, profile = settings.chunk_chars, settings.analyzer_profile
    if executor is None or sum(len(text) for *_, text in texts) < PARALLEL_MIN_CHARS:
        return lambda: _prepare_many(texts, chunk_chars, profile, statistics)
    # One slice per worker: each slice's statistics are merged by the writer, and fewer,
    # larger slices make that cheaper (SQLite's postings: 22 ms vs 60 ms for 8 slices).
    size = max(1, -(-len(texts) // worker_count()))
    slices = [texts[start : start + size] for start in range(0, len(texts), size)]
    futures: list[tuple[int, Future[PreparedBatch[StatisticsT]]]] = [
        (
            sum(len(text) for *_, text in part),
            executor.submit(_prepare_many, part, chunk_chars, profile, statistics),
        )
        for part in slices
    ]
    return lambda: _merged([_analysed(chars, future) for chars, future in futures], statistics)


def analysis_seconds(chars: int) -> float:
    """How long a worker may take to analyse a slice of ``chars`` characters."""
    return ANALYSIS_GRACE_SECONDS + chars / ANALYSIS_MIN_CHARS_PER_SECOND


def _analysed(chars: int, future: Future[PreparedBatch[StatisticsT]]) -> PreparedBatch[StatisticsT]:
    """A slice's analysis from its worker, waited for at most `analysis_seconds`."""
    seconds = analysis_seconds(chars)
    try:
        return future.result(timeout=seconds)
    except WaitTimeout as error:
        raise IngestError(
            f"an analysis worker did not finish {chars:,} characters in {seconds:.0f} s; "
            "nothing of this batch was written (earlier batches were). Retry, or ingest "
            "with parallel=False to analyse in this process"
        ) from error
    except BrokenExecutor as error:
        raise IngestError(
            f"an analysis worker process died ({error}); nothing of this batch was written "
            "(earlier batches were). Retry, or ingest with parallel=False"
        ) from error


def pipelined_ingest(
    batches: Iterable[Iterable[Document]],
    write: Callable[[list[Document], PreparedBatch[StatisticsT]], int],
    settings: IndexSettings,
    statistics: UnitStatistics[StatisticsT],
    executor: Executor | None,
    on_batch: Callable[[int], None] | None = None,
) -> int:
    """Validate, analyse and ``write`` batches in order, one transaction each; units written.

    With worker processes the next two batches are analysed while one is written (one
    ahead left the workers idle during each write); without them, one. A batch read in
    full is written even when reading a later one fails, so an interruption keeps every
    committed batch; a failed write stops the ingest. ``on_batch`` gets each batch's size.
    """
    try:
        return _ingest_in_order(batches, write, settings, statistics, executor, on_batch)
    except IngestError:
        if executor is not None:  # its workers are stuck or dead: the next ingest forks anew
            executor.shutdown(wait=False, cancel_futures=True)
        raise


def _ingest_in_order(
    batches: Iterable[Iterable[Document]],
    write: Callable[[list[Document], PreparedBatch[StatisticsT]], int],
    settings: IndexSettings,
    statistics: UnitStatistics[StatisticsT],
    executor: Executor | None,
    on_batch: Callable[[int], None] | None,
) -> int:
    """`pipelined_ingest`'s loop: analyse ahead, write in order, keep what was read."""
    ahead = 1 if executor is None else 2
    units = 0
    pending: deque[tuple[list[Document], Callable[[], PreparedBatch[StatisticsT]]]] = deque()
    try:
        for documents in batches:
            batch = validated_batch(documents)
            if batch:
                pending.append((batch, start_preparing(batch, settings, statistics, executor)))
            if len(pending) > ahead:
                units += _write_next(pending, write, on_batch)
    finally:
        while pending:
            units += _write_next(pending, write, on_batch)
    return units


def _write_next(
    pending: deque[tuple[list[Document], Callable[[], PreparedBatch[StatisticsT]]]],
    write: Callable[[list[Document], PreparedBatch[StatisticsT]], int],
    on_batch: Callable[[int], None] | None,
) -> int:
    """Write the oldest pending batch; if that fails, drop the rest and re-raise."""
    batch, prepared = pending.popleft()
    try:
        return _write_prepared(write, batch, prepared, on_batch)
    except BaseException:
        pending.clear()
        raise


def _write_prepared(
    write: Callable[[list[Document], PreparedBatch[StatisticsT]], int],
    batch: list[Document],
    prepared: Callable[[], PreparedBatch[StatisticsT]],
    on_batch: Callable[[int], None] | None,
) -> int:
    """Wait for a batch's analysis, write it, and report it."""
    units = write(batch, prepared())
    if on_batch is not None:
        on_batch(len(batch))
    return units


def _merged(
    slices: list[PreparedBatch[StatisticsT]], statistics: UnitStatistics[StatisticsT]
) -> PreparedBatch[StatisticsT]:
    """One batch from its slices, in order, with their statistics merged."""
    documents = [item for part in slices for item in part.documents]
    return PreparedBatch(documents, statistics.merge([part.statistics for part in slices]))


def _prepare_many(
    texts: Sequence[tuple[str, str, str]],
    chunk_chars: int,
    profile: Profile,
    statistics: UnitStatistics[StatisticsT],
) -> PreparedBatch[StatisticsT]:
    """Prepare a slice of (title, heading, text) triples and derive the backend's statistics
    of its units (in a worker process, so the writer only merges them)."""
    documents, tokens = [], []
    for triple in texts:
        document, unit_tokens = _prepare_one(*triple, chunk_chars, profile)
        documents.append(document)
        tokens.extend(unit_tokens)
    return PreparedBatch(documents, statistics.derive(tokens))


def worker_count() -> int:
    """Worker processes for analysis: the machine's cores, at most 8."""
    return max(1, min(8, os.cpu_count() or 1))


def new_executor() -> Executor:
    """A process pool for analysis, forked at its first task, whose workers exit if the
    writer dies; the caller shuts it down otherwise."""
    return AnalysisPool()


class AnalysisPool(Executor):
    """Forked analysis workers, started on the first task (small ingests never fork).

    Workers are forked (the platform default): a fork server or spawn would re-run the top
    level of a user's script without a ``__main__`` guard in every worker. A forked worker
    must never finalise what it inherited: garbage of the parent (an ONNX Runtime session,
    say) whose destructor waits on a thread only the parent has hung a worker for good in
    the test suite (its collector blocked in ``pthread_cond_destroy``). So garbage is
    collected just before the workers are forked (all at the first task), where its threads
    live, and each worker freezes what it inherited (`start_worker`).
    """

    def __init__(self) -> None:
        self._pool: ProcessPoolExecutor | None = None
        self._lock = threading.Lock()

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        """Run ``fn`` in a worker, forking the workers first if this is the first task."""
        with self._lock:
            if self._pool is None:
                gc.collect()
                self._pool = ProcessPoolExecutor(worker_count(), initializer=start_worker)
            return self._pool.submit(fn, *args, **kwargs)

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """Shut the workers down, if any were started (the next task forks new ones)."""
        with self._lock:
            if self._pool is not None:
                self._pool.shutdown(wait=wait, cancel_futures=cancel_futures)
                self._pool = None


def start_worker() -> None:
    """In a new worker: keep the collector off inherited objects, yield the CPU to the
    writer, and watch the parent."""
    gc.freeze()
    if hasattr(os, "nice"):  # POSIX
        with contextlib.suppress(OSError):  # a sandbox may refuse: the worker runs as before
            os.nice(WORKER_NICENESS)
    watch_parent()


def watch_parent() -> None:
    """In a worker: start a daemon thread that ends this process once its parent is gone.

    A SIGKILLed writer cannot shut its pool down, and its workers, blocked on the task queue
    (whose write end they inherited), would wait for ever.
    """
    threading.Thread(target=_exit_with_parent, args=(os.getppid(),), daemon=True).start()


def _exit_with_parent(parent_pid: int) -> None:
    """Wait on the parent's sentinel (any platform), checking the parent pid (POSIX) too."""
    parent = multiprocessing.parent_process()
    while True:
        if parent is not None:
            parent.join(PARENT_CHECK_SECONDS)  # returns early when the parent's sentinel closes
            if not parent.is_alive():
                os._exit(1)
        else:
            threading.Event().wait(PARENT_CHECK_SECONDS)
        if os.getppid() != parent_pid:  # reparented: the parent died
            os._exit(1)


def _prepare_one(
    title: str, heading: str, text: str, chunk_chars: int, profile: Profile
) -> tuple[PreparedDocument, list[UnitTokens]]:
    """Chunk one document's text and analyse each unit, giving it its markdown heading path;
    also each unit's token lists."""
    title_list = tokenize(title, profile=profile)
    title_tokens = " ".join(title_list)
    headings = find_headings(text)
    units: list[PreparedUnit] = []
    tokens: list[UnitTokens] = []
    for span in chunk_spans(text, chunk_chars):
        path = unit_heading(heading, headings, span.start, span.end)
        lists = unit_token_lists(title_list, path, text[span.start : span.end], profile)
        units.append(
            PreparedUnit(
                span.start, span.end, path, title_tokens, " ".join(lists[1]), " ".join(lists[2])
            )
        )
        tokens.append(lists)
    return PreparedDocument(tuple(units)), tokens


def unit_token_lists(title_tokens: list[str], path: str, body: str, profile: Profile) -> UnitTokens:
    """A unit's (title, heading, body) tokens, given its document's title tokens: what ingest
    writes to FTS5 (each joined by spaces) and counts the unit's statistics from."""
    return title_tokens, tokenize(path, profile=profile), body_tokens(body, profile)


def unit_token_texts(title: str, path: str, body: str, profile: Profile) -> tuple[str, str, str]:
    """A unit's (title, heading, body) token texts, exactly as ingest writes them to FTS5."""
    title_tokens, heading, body_list = unit_token_lists(
        tokenize(title, profile=profile), path, body, profile
    )
    return " ".join(title_tokens), " ".join(heading), " ".join(body_list)


def token_checksum(title: str, heading: str, body: str) -> int:
    """A checksum of a unit's token texts, stored at ingest to verify re-analysis later."""
    return zlib.crc32("\x1f".join((title, heading, body)).encode("utf-8"))
