"""LlamaIndex MetadataFilters as a SAG2 filter expression, which the index evaluates in SQLite.

Supported: the operators ``EQ`` (also ``ExactMatchFilter``), ``NE``, ``GT``, ``GTE``, ``LT``,
``LTE``, ``IN`` and ``NIN``, under ``AND`` and ``OR`` conditions, nested to any depth the core
allows. Keys are node metadata keys taken literally (a dot is part of the key). Anything else
(``NOT``, ``CONTAINS``, text matching, ...) raises, because post-filtering the judged results
would silently return fewer than ``similarity_top_k`` nodes. Several filter sets (the
retriever's and the query's) are combined with ``AND``. Value semantics (``None`` meaning
"missing or null", type-exact comparisons) are those of ``sag2_retrievers.filters``.
"""

from __future__ import annotations

from llama_index.core.vector_stores.types import (
    FilterCondition,
    FilterOperator,
    MetadataFilter,
    MetadataFilters,
)

from sag2_retrievers import InvalidInputError
from sag2_retrievers.filters import AllOf, AnyOf, Condition, FilterExpr, flat_key

SUPPORTED = "EQ, NE, GT, GTE, LT, LTE, IN and NIN filters under AND or OR conditions"
OPERATORS = {
    FilterOperator.EQ: "$eq",
    FilterOperator.NE: "$ne",
    FilterOperator.GT: "$gt",
    FilterOperator.GTE: "$gte",
    FilterOperator.LT: "$lt",
    FilterOperator.LTE: "$lte",
    FilterOperator.IN: "$in",
    FilterOperator.NIN: "$nin",
}


def to_core_filters(*filter_sets: MetadataFilters | None) -> FilterExpr | None:
    """The AND of all filter sets as a SAG2 filter expression; None when nothing is given."""
    clauses = [_group(filter_set) for filter_set in filter_sets if filter_set is not None]
    if not clauses:
        return None
    return clauses[0] if len(clauses) == 1 else AllOf(tuple(clauses))


def _group(filter_set: MetadataFilters) -> FilterExpr:
    """One MetadataFilters group: its filters and nested groups under AND or OR."""
    members = tuple(
        _group(item) if isinstance(item, MetadataFilters) else _condition(item)
        for item in filter_set.filters
    )
    if filter_set.condition in (None, FilterCondition.AND):
        return AllOf(members)
    if filter_set.condition == FilterCondition.OR:
        return AnyOf(members)
    raise InvalidInputError(
        f"SAG2 filters support {SUPPORTED}; got condition {_name(filter_set.condition)}. "
        "Express it with NE / NIN, or store a combined metadata field"
    )


def _condition(item: MetadataFilter) -> Condition:
    """One filter as a Condition on the literal metadata key."""
    op = OPERATORS.get(item.operator)
    if op is None:
        raise InvalidInputError(
            f"filter on {item.key!r}: operator {_name(item.operator)} is not supported; "
            f"SAG2 filters support {SUPPORTED}"
        )
    key = flat_key(item.key)
    if op in ("$in", "$nin"):
        if not isinstance(item.value, list):
            raise InvalidInputError(
                f"filter on {item.key!r}: {_name(item.operator)} needs a list of values, "
                f"got {item.value!r}"
            )
        return Condition(key, op, tuple(item.value))
    if isinstance(item.value, list):
        raise InvalidInputError(
            f"filter on {item.key!r}: {_name(item.operator)} needs a single value; use "
            "FilterOperator.IN for a list"
        )
    return Condition(key, op, item.value)


def _name(member: FilterCondition | FilterOperator | None) -> str:
    """An enum member's upper-case name, for error messages."""
    return "None" if member is None else member.name
