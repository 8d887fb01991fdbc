"""LlamaIndex MetadataFilters as SAG2 filters, which the index evaluates inside SQLite.

Supported: ``EQ`` (also ``ExactMatchFilter``) and ``IN`` filters combined with ``AND``.
Anything else raises, because post-filtering the judged results would silently return fewer
than ``similarity_top_k`` nodes. Several filter sets (the retriever's and the query's) are
combined with ``AND``: a key constrained twice keeps the values both allow.
"""

from __future__ import annotations

from llama_index.core.vector_stores.types import (
    FilterCondition,
    FilterOperator,
    MetadataFilter,
    MetadataFilters,
)

from sag2_retrievers import InvalidInputError
from sag2_retrievers.index import Filters, FilterValue

SUPPORTED = "EQ and IN filters combined with AND"


def to_core_filters(*filter_sets: MetadataFilters | None) -> Filters | None:
    """The AND of all filter sets as a SAG2 filter mapping; None when nothing is constrained."""
    allowed: dict[str, list[FilterValue]] = {}
    for filter_set in filter_sets:
        if filter_set is None:
            continue
        for key, values in _constraints(filter_set):
            allowed[key] = [v for v in allowed[key] if v in values] if key in allowed else values
    if not allowed:
        return None
    # A single value stays a scalar: SAG2 compares it with IS, which also matches None.
    return {key: values[0] if len(values) == 1 else values for key, values in allowed.items()}


def _constraints(filter_set: MetadataFilters) -> list[tuple[str, list[FilterValue]]]:
    """Each filter of an AND set as (metadata key, allowed values)."""
    if filter_set.condition not in (None, FilterCondition.AND):
        raise InvalidInputError(
            f"SAG2 filters support {SUPPORTED}; got condition {_name(filter_set.condition)}. "
            "Use one retriever per alternative, or store a combined metadata field"
        )
    constraints = []
    for item in filter_set.filters:
        if not isinstance(item, MetadataFilter):
            raise InvalidInputError(
                f"SAG2 filters support {SUPPORTED}; nested MetadataFilters groups are not "
                "supported: flatten them into one AND group"
            )
        constraints.append((item.key, _allowed_values(item)))
    return constraints


def _allowed_values(item: MetadataFilter) -> list[FilterValue]:
    """The values one EQ or IN filter allows."""
    if item.operator == FilterOperator.EQ:
        if isinstance(item.value, list):
            raise InvalidInputError(
                f"filter on {item.key!r}: EQ needs a single value; use FilterOperator.IN for a list"
            )
        return [item.value]
    if item.operator == FilterOperator.IN:
        if not isinstance(item.value, list):
            raise InvalidInputError(
                f"filter on {item.key!r}: IN needs a list of values, got {item.value!r}"
            )
        return list(dict.fromkeys(item.value))
    raise InvalidInputError(
        f"filter on {item.key!r}: operator {_name(item.operator)} is not supported; "
        f"SAG2 filters support {SUPPORTED}"
    )


def _name(member: FilterCondition | FilterOperator | None) -> str:
    """An enum member's upper-case name, for error messages."""
    return "None" if member is None else member.name
