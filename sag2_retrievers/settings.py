"""IndexSettings: every setting that changes retrieval results, its meta record and its check.

Both backends record them in their meta table and check them on open (`reconcile_settings`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from typing import Any, Literal

from .analysis import ANALYZER_VERSIONS, DEFAULT_PROFILE, FTS_TOKENIZERS, PROFILES, STOPWORDS
from .bm25 import BM25_WEIGHTS
from .errors import IndexSettingsMismatchError, InvalidInputError

SCHEMA_VERSION = "3"  # 3: postings segments, contentless FTS5, no stored expansion
# How units get their heading field (markdown.py); files built before it have empty headings.
HEADING_RULE = "markdown-atx-1"
DOCUMENT_COLLECTION_CHUNK_CHARS = 1000


def setting(
    default: Any,
    kind: type,
    *,
    low: int | None = None,
    high: int | None = None,
    choices: tuple[str, ...] | None = None,
    legacy: str | None = None,
) -> Any:
    """A settings field that records its type and allowed range or choices, checked for
    every value; ``legacy`` is its meta row in files written before the setting existed."""
    spec = {"kind": kind, "low": low, "high": high, "choices": choices, "legacy": legacy}
    return field(default=default, metadata=spec)


@dataclass(frozen=True)
class IndexSettings:
    """Every setting that changes retrieval results; stored in ``meta`` and checked on open.

    Each field is declared with `setting` (type and range), so construction and reading back
    from meta validate every field the same way; a new setting needs only its declaration.
    """

    chunk_chars: int = setting(2200, int, low=20, high=10_000_000)
    # "sag2": the project's analyzer; "paper": the reference reading of the paper (analysis/).
    # Files from before this setting were all built with the "sag2" rules.
    analyzer_profile: Literal["sag2", "paper"] = setting(
        DEFAULT_PROFILE, str, choices=PROFILES, legacy=DEFAULT_PROFILE
    )

    def __post_init__(self) -> None:
        """Reject a value of the wrong type or outside its range, naming the field."""
        for spec in fields(self):
            problem = _setting_problem(spec.metadata, getattr(self, spec.name))
            if problem:
                raise InvalidInputError(f"IndexSettings.{spec.name} {problem}")

    @classmethod
    def for_document_collections(cls) -> IndexSettings:
        """The paper's EnterpriseRAG setting for long documents: units of about 1,000
        characters, never above 1,200 (``chunk_spans`` cuts within 0.8-1.2x the target)."""
        return cls(chunk_chars=DOCUMENT_COLLECTION_CHUNK_CHARS)

    @property
    def fts_tokenizer(self) -> str:
        """The FTS5 tokenizer the analyzer profile's tokens are final for."""
        return FTS_TOKENIZERS[self.analyzer_profile]

    def as_meta(self) -> dict[str, str]:
        """The settings, plus the profile's analyzer version and the scoring versions, as meta
        rows (a "paper" file of an older analyzer version is refused: rebuild it)."""
        rows = {key: _meta_text(value) for key, value in asdict(self).items()}
        rows.update(
            schema_version=SCHEMA_VERSION,
            analyzer_version=ANALYZER_VERSIONS[self.analyzer_profile],
            stopwords=" ".join(sorted(STOPWORDS)),
            fts_tokenizer=self.fts_tokenizer,
            bm25_weights=",".join(str(w) for w in BM25_WEIGHTS),
            heading_rule=HEADING_RULE,
        )
        return rows

    @classmethod
    def completed_meta(cls, meta: Mapping[str, str]) -> dict[str, str]:
        """A file's meta rows with the legacy value of every setting added since it was
        written (an older file is read as what it was built with, not refused)."""
        rows = dict(meta)
        for spec in fields(cls):
            if spec.name not in rows and spec.metadata["legacy"] is not None:
                rows[spec.name] = spec.metadata["legacy"]
        return rows

    @classmethod
    def from_meta(cls, meta: Mapping[str, str]) -> IndexSettings:
        """Read the user-settable part back from meta rows; a bad row is a settings mismatch."""
        values: dict[str, Any] = {}
        rows = cls.completed_meta(meta)
        for spec in fields(cls):
            stored = rows.get(spec.name)
            value = _parse_meta(spec.metadata["kind"], stored)
            problem = _setting_problem(spec.metadata, value)
            if stored is None or problem:
                raise IndexSettingsMismatchError(
                    f"the file's meta row {spec.name}={stored!r} is not a valid setting "
                    f"({problem or 'missing'}); rebuild the index"
                )
            values[spec.name] = value
        return cls(**values)


def _setting_problem(spec: Mapping[str, Any], value: object) -> str | None:
    """Why a value does not fit its setting's declared type and range, or None when it does."""
    kind = spec["kind"]
    # bool is an int subclass; neither may stand for the other.
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        return f"must be {kind.__name__}, got {value!r}"
    choices = spec.get("choices")
    if choices is not None and value not in choices:
        return f"must be one of {', '.join(map(repr, choices))}, got {value!r}"
    low, high = spec["low"], spec["high"]
    numeric = isinstance(value, int) and not isinstance(value, bool)
    if numeric and ((low is not None and value < low) or (high is not None and value > high)):
        return f"must be within [{low}, {high}], got {value!r}"
    return None


def _meta_text(value: object) -> str:
    """How a setting's value is written to meta (booleans as 1/0)."""
    return str(int(value)) if isinstance(value, bool) else str(value)


def _parse_meta(kind: type, stored: str | None) -> object:
    """A meta row's text as the setting's type, or the text itself when it does not parse."""
    if stored is None or kind is str:
        return stored
    try:
        number = int(stored)
    except ValueError:
        return stored
    return bool(number) if kind is bool and number in (0, 1) else number


def reconcile_settings(
    where: str, stored: dict[str, str], requested: IndexSettings | None
) -> IndexSettings:
    """Adopt stored settings, or raise when they differ from the requested or the analyzer's.

    ``where`` names the index in the error ("index 'x.db'", "PostgreSQL schema 'sag2'").
    """
    if not stored:
        return requested or IndexSettings()
    stored = IndexSettings.completed_meta(stored)
    try:
        current = IndexSettings.from_meta(stored)
    except IndexSettingsMismatchError as error:
        raise IndexSettingsMismatchError(f"{where}: {error}") from None
    expected = (requested or current).as_meta()
    differences = [
        f"{key}: stored {stored.get(key)!r}, requested {value!r}"
        for key, value in expected.items()
        if stored.get(key) != value
    ]
    if differences:
        raise IndexSettingsMismatchError(
            f"{where} was built with different settings ("
            + "; ".join(differences)
            + "); open it with matching settings or rebuild it"
        )
    return current
