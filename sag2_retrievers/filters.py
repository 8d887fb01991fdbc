"""Metadata filters: one validated expression tree, parsed from dicts; each backend compiles it.

Two input forms are accepted and may be mixed:

- flat: ``{"lang": "en", "year": [1937, 1954]}``, a value meaning ``$eq`` and a list ``$in``;
- the Chroma/PGVector dialect: ``{"year": {"$gte": 1900, "$lt": 2000}}``, with the operators
  ``$eq $ne $gt $gte $lt $lte $in $nin`` and the groups ``{"$and": [...]}``, ``{"$or": [...]}``.

Several keys in one mapping, or several operators on one key, are all required (AND).

Keys name a path into the document's metadata: dot-separated segments, each an identifier
(letters, digits, ``_``; not starting with a digit) or a double-quoted label holding any
characters but ``"`` and NUL. ``source.name`` is the ``name`` inside ``source``; ``"file.name"``
is the top-level key ``file.name`` itself (see `flat_key`).

Values and their semantics:

- strings match strings only; numbers match numbers only (``1`` equals ``1.0``); booleans
  match JSON ``true``/``false`` only (never ``1``/``0``);
- ``None`` means "the key is missing or null", in ``$eq``/``$ne`` and inside ``$in``/``$nin``;
- ``$ne`` and ``$nin`` match documents without the key, unless ``None`` is among the values;
- ``$gt``/``$gte``/``$lt``/``$lte`` take a number or a string and compare within that type
  only (numbers numerically, strings by code point); a missing key never matches;
- rejected: NaN and infinities, integers outside SQLite's 64-bit range, strings holding NUL,
  other types, empty ``$and``/``$or`` lists, nesting deeper than `MAX_DEPTH` groups, and more
  than `MAX_CONDITIONS` conditions in all (a wide ``$or`` of equalities is one ``$in``).

Each backend's compiler (``backends/*/filters.py``) binds every value and path as an SQL
parameter; only fixed SQL text is ever assembled.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypeAlias

from .errors import InvalidInputError

Scalar: TypeAlias = str | int | float | bool | None
OPERATORS = ("$eq", "$ne", "$gt", "$gte", "$lt", "$lte", "$in", "$nin")
COMPARISONS = {"$gt": ">", "$gte": ">=", "$lt": "<", "$lte": "<="}
MAX_DEPTH = 32
MAX_LIST_VALUES = 10_000
# Each condition binds up to 9 SQL parameters: 2,000 stay within SQLite's smallest default
# limit of 32,766 (and PostgreSQL's 65,535).
MAX_CONDITIONS = 2_000
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
_SEGMENT = r'(?:[A-Za-z_][A-Za-z0-9_]*|"[^"\x00]+")'
KEY_PATTERN = re.compile(rf"{_SEGMENT}(?:\.{_SEGMENT})*")
SEGMENTS = re.compile(_SEGMENT)


@dataclass(frozen=True)
class Condition:
    """One test of a metadata key: ``key op value`` (``value`` a tuple for $in / $nin)."""

    key: str
    op: str
    value: Scalar | tuple[Scalar, ...]

    def __post_init__(self) -> None:
        """Validate key, operator and value, so every Condition can be compiled."""
        check_key(self.key)
        if self.op not in OPERATORS:
            raise InvalidInputError(
                f"filter {self.key!r}: unknown operator {self.op!r}; use one of {OPERATORS}"
            )
        if self.op in ("$in", "$nin"):
            if not isinstance(self.value, tuple):
                raise InvalidInputError(f"filter {self.key!r}: {self.op} needs a list of values")
            if len(self.value) > MAX_LIST_VALUES:
                raise InvalidInputError(
                    f"filter {self.key!r}: {len(self.value):,} values, more than the limit of "
                    f"{MAX_LIST_VALUES:,}"
                )
            for item in self.value:
                check_value(self.key, item)
            return
        check_value(self.key, self.value)
        if self.op in COMPARISONS and (self.value is None or isinstance(self.value, bool)):
            raise InvalidInputError(
                f"filter {self.key!r}: {self.op} needs a number or a string, got {self.value!r}"
            )


@dataclass(frozen=True)
class AllOf:
    """Every clause must hold (an empty AllOf holds for every document)."""

    clauses: tuple[FilterExpr, ...]


@dataclass(frozen=True)
class AnyOf:
    """At least one clause must hold (an empty AnyOf holds for none)."""

    clauses: tuple[FilterExpr, ...]


FilterExpr: TypeAlias = Condition | AllOf | AnyOf
# The one alias for metadata filters in every read: a flat or Chroma/PGVector-style mapping,
# or a parsed expression; each backend compiles it itself (its `filters.py`).
Filters: TypeAlias = Mapping[str, Any] | FilterExpr


def flat_key(name: str) -> str:
    """A key addressing the top-level metadata key ``name`` literally, dots and all."""
    if not isinstance(name, str) or not name or '"' in name or "\x00" in name:
        raise InvalidInputError(
            f"filter key {name!r} is not allowed; a literal key must be a non-empty string "
            'without " or NUL'
        )
    return name if re.fullmatch(_SEGMENT, name) else f'"{name}"'


def check_key(key: object) -> None:
    """Refuse a key that is not a path of identifiers and quoted labels."""
    if not isinstance(key, str) or not KEY_PATTERN.fullmatch(key):
        raise InvalidInputError(
            f"filter key {key!r} is not allowed; use letters, digits and _ (dots for nesting), "
            "or a double-quoted label such as '\"file.name\"'"
        )


def check_value(key: str, value: object) -> None:
    """Refuse a value the index cannot compare exactly, naming the key."""
    if value is None or isinstance(value, bool):
        return
    if isinstance(value, str):
        if "\x00" in value:
            raise InvalidInputError(f"filter {key!r}: value {value!r} contains a NUL character")
        return
    if isinstance(value, int):
        if not INT64_MIN <= value <= INT64_MAX:
            raise InvalidInputError(
                f"filter {key!r}: integer {value} is outside SQLite's 64-bit range"
            )
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            raise InvalidInputError(f"filter {key!r}: {value!r} is not a finite number")
        return
    raise InvalidInputError(
        f"filter {key!r}: value {value!r} must be a string, number, boolean, None, or a list"
    )


def parse_filters(raw: Mapping[str, Any] | FilterExpr | None) -> FilterExpr | None:
    """The expression for a filter mapping (flat or dialect) or tree; None when it is empty."""
    if raw is None:
        return None
    if isinstance(raw, (Condition, AllOf, AnyOf)):
        _check_tree(raw, 0)
        expr: FilterExpr = raw
    elif isinstance(raw, Mapping):
        expr = _parse_mapping(raw, 0)
    else:
        raise InvalidInputError(
            "filters must be a mapping of metadata key to value(s), or a FilterExpr"
        )
    conditions = count_conditions(expr)
    if conditions > MAX_CONDITIONS:
        raise InvalidInputError(
            f"filters hold {conditions:,} conditions, more than the limit of "
            f"{MAX_CONDITIONS:,}; write alternatives on one key as one $in list"
        )
    return None if expr == AllOf(()) else expr


def count_conditions(expr: FilterExpr) -> int:
    """The number of conditions in an expression tree."""
    if isinstance(expr, Condition):
        return 1
    return sum(count_conditions(clause) for clause in expr.clauses)


def _parse_mapping(raw: Mapping[Any, Any], depth: int) -> FilterExpr:
    """All of a mapping's entries: keys with values or operators, and $and / $or groups."""
    if depth > MAX_DEPTH:
        raise InvalidInputError(f"filters are nested deeper than {MAX_DEPTH} groups")
    clauses: list[FilterExpr] = []
    for key, value in raw.items():
        if key in ("$and", "$or"):
            clauses.append(_parse_group(key, value, depth))
        else:
            check_key(key)
            clauses.extend(_parse_entry(key, value))
    return clauses[0] if len(clauses) == 1 else AllOf(tuple(clauses))


def _parse_group(name: str, value: object, depth: int) -> FilterExpr:
    """A $and / $or group: a non-empty list of filter mappings."""
    if not isinstance(value, (list, tuple)) or not value:
        raise InvalidInputError(f"filter {name} needs a non-empty list of filter mappings")
    members = []
    for member in value:
        if not isinstance(member, Mapping):
            raise InvalidInputError(f"filter {name}: {member!r} is not a filter mapping")
        members.append(_parse_mapping(member, depth + 1))
    return AllOf(tuple(members)) if name == "$and" else AnyOf(tuple(members))


def _parse_entry(key: str, value: object) -> list[FilterExpr]:
    """One key's conditions: a flat value, a flat list, or a mapping of operators."""
    if isinstance(value, Mapping):
        if not value:
            raise InvalidInputError(f"filter {key!r}: an operator mapping must not be empty")
        return [_condition(key, op, operand) for op, operand in value.items()]
    if isinstance(value, (list, tuple, set, frozenset)):
        return [_condition(key, "$in", value)]
    return [_condition(key, "$eq", value)]


def _condition(key: str, op: object, operand: object) -> Condition:
    """A Condition from a dialect entry, lists becoming tuples."""
    if not isinstance(op, str) or op not in OPERATORS:
        raise InvalidInputError(
            f"filter {key!r}: unknown operator {op!r}; use one of {', '.join(OPERATORS)}"
        )
    if op in ("$in", "$nin"):
        if not isinstance(operand, (list, tuple, set, frozenset)):
            raise InvalidInputError(f"filter {key!r}: {op} needs a list of values")
        return Condition(key, op, tuple(operand))
    if isinstance(operand, (list, tuple, set, frozenset, Mapping)):
        raise InvalidInputError(f"filter {key!r}: {op} needs a single value, got {operand!r}")
    return Condition(key, op, operand)  # type: ignore[arg-type]


def _check_tree(expr: FilterExpr, depth: int) -> None:
    """A tree given directly: groups hold expressions and nesting is bounded."""
    if depth > MAX_DEPTH:
        raise InvalidInputError(f"filters are nested deeper than {MAX_DEPTH} groups")
    if isinstance(expr, (AllOf, AnyOf)):
        for clause in expr.clauses:
            if not isinstance(clause, (Condition, AllOf, AnyOf)):
                raise InvalidInputError(f"filter group holds {clause!r}, not a FilterExpr")
            _check_tree(clause, depth + 1)


def key_segments(key: str) -> tuple[str, ...]:
    """The labels of a validated key's path: ``source."file.name"`` -> ("source", "file.name")."""
    return tuple(segment.strip('"') for segment in SEGMENTS.findall(key))
