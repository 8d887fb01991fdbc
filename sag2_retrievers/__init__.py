"""sag2-retrievers: SAG2 multi-hop retrieval over one SQLite FTS5 file with a query-time judge."""

from .backends.base import DocumentIndex, LexicalBackend
from .backends.sqlite import SQLiteIndex
from .config import SAG2Config
from .documents import Document, Unit
from .engine import SAG2Engine
from .errors import (
    IndexBusyError,
    IndexFullError,
    IndexSettingsMismatchError,
    IndexUnavailableError,
    IngestError,
    InvalidInputError,
    JudgeConfigurationError,
    JudgeError,
    RemoteJudgeRefusedError,
    SAG2Error,
)
from .filters import Filters
from .index_reads import SearchHit
from .judges.base import Candidate, ContextPassage, Judge, JudgeRequest
from .results import RetrievalResult, RetrievedUnit, RoundTrace
from .settings import IndexSettings

__version__ = "0.1.0"

__all__ = [
    "Candidate",
    "ContextPassage",
    "Document",
    "DocumentIndex",
    "Filters",
    "IndexBusyError",
    "IndexFullError",
    "IndexSettings",
    "IndexSettingsMismatchError",
    "IndexUnavailableError",
    "IngestError",
    "InvalidInputError",
    "Judge",
    "JudgeConfigurationError",
    "JudgeError",
    "JudgeRequest",
    "LexicalBackend",
    "RemoteJudgeRefusedError",
    "RetrievalResult",
    "RetrievedUnit",
    "RoundTrace",
    "SAG2Config",
    "SAG2Engine",
    "SAG2Error",
    "SQLiteIndex",
    "SearchHit",
    "Unit",
    "__version__",
]
