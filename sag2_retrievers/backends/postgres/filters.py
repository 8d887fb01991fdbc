"""Metadata filter expressions compiled for PostgreSQL: bound SQL over ``d.metadata`` (jsonb).

The semantics are those of the SQLite compiler (``backends/sqlite/filters.py``; documented in
``filters.py``): equality and membership within each value's own JSON type, ``None`` meaning
missing or null, ranges within numbers or within strings (by code point), and $ne / $nin as
exact negations. Every path and value is a named bound parameter; casts sit inside ``CASE`` so
a value of another JSON type is never cast.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from psycopg import sql

from ...filters import COMPARISONS, AllOf, Condition, FilterExpr, Scalar, key_segments


class _Parameters:
    """Named placeholders (``%(filter_0)s``...) and the values bound to them."""

    def __init__(self) -> None:
        self.values: dict[str, Any] = {}

    def bind(self, value: Any, cast: str) -> sql.Composable:
        """A placeholder for ``value`` with an SQL cast (a fixed type name)."""
        name = f"filter_{len(self.values)}"
        self.values[name] = value
        return sql.SQL("{}::{}").format(sql.Placeholder(name), sql.SQL(cast))


def compile_postgres(expr: FilterExpr) -> tuple[sql.Composable, dict[str, Any]]:
    """A condition on ``d.metadata`` and the values of its named placeholders."""
    parameters = _Parameters()
    return _compile(expr, parameters), parameters.values


def _compile(expr: FilterExpr, parameters: _Parameters) -> sql.Composable:
    """An expression's SQL, groups as parenthesised AND / OR."""
    if isinstance(expr, Condition):
        return _condition(expr, parameters)
    parts = [_compile(clause, parameters) for clause in expr.clauses]
    if not parts:
        return sql.SQL("true" if isinstance(expr, AllOf) else "false")
    joiner = sql.SQL(" AND " if isinstance(expr, AllOf) else " OR ")
    return sql.SQL("({})").format(joiner.join(parts))


def _condition(condition: Condition, parameters: _Parameters) -> sql.Composable:
    """One condition: equality and membership type-exact, ranges restricted to one type."""
    path = list(key_segments(condition.key))
    op, value = condition.op, condition.value
    if op in COMPARISONS:
        assert isinstance(value, (str, int, float))
        operator = sql.SQL(COMPARISONS[op])
        if isinstance(value, str):
            test = sql.SQL('{} COLLATE "C" {} {}').format(
                _text(path, parameters), operator, parameters.bind(value, "text")
            )
            return _when(path, "string", test, parameters)
        test = sql.SQL("{}::numeric {} {}").format(
            _text(path, parameters), operator, parameters.bind(repr(value), "numeric")
        )
        return _when(path, "number", test, parameters)
    values = value if isinstance(value, tuple) else (value,)
    matches = _matches_any(path, values, parameters)
    return sql.SQL("NOT {}").format(matches) if op in ("$ne", "$nin") else matches


def _json_type(path: list[str], parameters: _Parameters) -> sql.Composable:
    """The JSON type at ``path``, 'missing' when absent (never NULL, so NOT is exact)."""
    return sql.SQL("coalesce(jsonb_typeof(d.metadata #> {}), 'missing')").format(
        parameters.bind(path, "text[]")
    )


def _text(path: list[str], parameters: _Parameters) -> sql.Composable:
    """The value at ``path`` as text."""
    return sql.SQL("(d.metadata #>> {})").format(parameters.bind(path, "text[]"))


def _when(
    path: list[str], json_type: str, test: sql.Composable, parameters: _Parameters
) -> sql.Composable:
    """``test`` evaluated only when the key holds a value of ``json_type``, else false."""
    return sql.SQL("(CASE WHEN {} = {} THEN {} ELSE false END)").format(
        _json_type(path, parameters), sql.Literal(json_type), test
    )


def _matches_any(
    path: list[str], values: Sequence[Scalar], parameters: _Parameters
) -> sql.Composable:
    """Whether the key's value equals one of the values, each compared within its own type."""
    parts: list[sql.Composable] = []
    if any(value is None for value in values):
        parts.append(sql.SQL("{} IN ('missing', 'null')").format(_json_type(path, parameters)))
    groups: tuple[tuple[str, list[str], str], ...] = (
        (
            "boolean",
            sorted({"true" if v else "false" for v in values if isinstance(v, bool)}),
            "text[]",
        ),
        ("string", [v for v in values if isinstance(v, str)], "text[]"),
        ("number", [repr(v) for v in values if _is_number(v)], "numeric[]"),
    )
    for json_type, group, cast in groups:
        if group:
            value = _text(path, parameters)
            if json_type == "number":
                value = sql.SQL("{}::numeric").format(value)
            test = sql.SQL("{} = ANY({})").format(value, parameters.bind(group, cast))
            parts.append(_when(path, json_type, test, parameters))
    if not parts:
        return sql.SQL("false")
    return sql.SQL("({})").format(sql.SQL(" OR ").join(parts))


def _is_number(value: Scalar) -> bool:
    """True for ints and floats, not booleans."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)
