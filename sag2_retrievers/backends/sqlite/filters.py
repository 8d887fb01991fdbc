"""Metadata filters as SQLite: a bound condition over ``documents.metadata`` (JSON1)."""

from __future__ import annotations

import json
from collections.abc import Sequence

from ...filters import (
    COMPARISONS,
    SEGMENTS,
    AllOf,
    Condition,
    FilterExpr,
    Scalar,
    parse_filters,
)
from ..base import Filters

NO_FILTER = "1"
_METADATA = "documents.metadata"
# json_type() as a two-valued expression: a missing path gives 'missing', never NULL, so
# NOT (...) of any condition below is exact.
_TYPE = f"ifnull(json_type({_METADATA}, ?), 'missing')"
_VALUE = f"json_extract({_METADATA}, ?)"


def filter_sql(filters: Filters | None) -> tuple[str, list[object]]:
    """The one place filters become SQL: a bound condition (`NO_FILTER` when there is none)."""
    expr = parse_filters(filters)
    return (NO_FILTER, []) if expr is None else compile_sqlite(expr)


def compile_sqlite(expr: FilterExpr) -> tuple[str, list[object]]:
    """A SQL condition over ``documents.metadata`` and its bound parameters, in order."""
    if isinstance(expr, Condition):
        return _compile_condition(expr)
    parts = [compile_sqlite(clause) for clause in expr.clauses]
    if not parts:
        return ("1" if isinstance(expr, AllOf) else "0"), []
    joiner = " AND " if isinstance(expr, AllOf) else " OR "
    params = [param for _, part_params in parts for param in part_params]
    return "(" + _balanced([text for text, _ in parts], joiner) + ")", params


def _balanced(texts: list[str], joiner: str) -> str:
    """Clauses joined as a balanced tree: SQLite nests ``a OR b OR c`` one level per clause
    and refuses past 1,000 levels; balanced, 2,000 clauses need 11."""
    if len(texts) == 1:
        return texts[0]
    middle = len(texts) // 2
    left, right = _balanced(texts[:middle], joiner), _balanced(texts[middle:], joiner)
    return f"({left}{joiner}{right})"


def json_path(key: str) -> str:
    """The SQLite JSON path of a validated key: ``source.name`` -> ``$.source.name``."""
    return "$" + "".join("." + segment for segment in SEGMENTS.findall(key))


def _compile_condition(condition: Condition) -> tuple[str, list[object]]:
    """One condition's SQL: equality and membership are type-exact, ranges type-restricted."""
    path = json_path(condition.key)
    op, value = condition.op, condition.value
    if op in COMPARISONS:
        assert isinstance(value, (str, int, float))
        types = "('text')" if isinstance(value, str) else "('integer', 'real')"
        text = f"({_TYPE} IN {types} AND {_VALUE} {COMPARISONS[op]} ?)"
        return text, [path, path, value]
    values = value if isinstance(value, tuple) else (value,)
    text, params = _matches_any(path, values)
    return (f"NOT {text}" if op in ("$ne", "$nin") else text), params


def _matches_any(path: str, values: Sequence[Scalar]) -> tuple[str, list[object]]:
    """Whether the key's value equals one of the values, each compared within its own type."""
    parts: list[str] = []
    params: list[object] = []
    if any(value is None for value in values):
        parts.append(f"{_TYPE} IN ('missing', 'null')")
        params.append(path)
    booleans = sorted({"true" if v else "false" for v in values if isinstance(v, bool)})
    if booleans:
        parts.append(f"{_TYPE} IN (SELECT value FROM json_each(?))")
        params.extend([path, json.dumps(booleans)])
    for kind, types in ((str, "('text')"), ((int, float), "('integer', 'real')")):
        group = [v for v in values if isinstance(v, kind) and not isinstance(v, bool)]
        if group:
            parts.append(f"({_TYPE} IN {types} AND {_VALUE} IN (SELECT value FROM json_each(?)))")
            params.extend([path, path, json.dumps(group, ensure_ascii=False)])
    if not parts:
        return "0", []
    return "(" + " OR ".join(parts) + ")", params
