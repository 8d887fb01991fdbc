"""The metadata filter module: parsing both dialects, validation, and SQLite semantics."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sag2_retrievers import SQLiteIndex
from sag2_retrievers.backends.sqlite.filters import compile_sqlite, json_path
from sag2_retrievers.documents import Document
from sag2_retrievers.errors import InvalidInputError
from sag2_retrievers.filters import (
    MAX_DEPTH,
    AllOf,
    AnyOf,
    Condition,
    flat_key,
    parse_filters,
)

METADATA = {
    "int1": {"n": 1, "tag": "a", "flag": True},
    "real": {"n": 2.5, "tag": "b", "flag": False},
    "text1": {"n": "1", "tag": "c"},
    "null": {"n": None, "tag": "a"},
    "missing": {"tag": "b"},
    "big": {"n": 2**62, "file.name": "a.txt", "file": {"name": "nested.txt"}},
    "array": {"n": [1], "tag": "[1]"},
}


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SQLiteIndex]:
    """One document per metadata shape, all matching the word 'shared'."""
    path = tmp_path_factory.mktemp("filters") / "index.sqlite"
    with SQLiteIndex(path) as opened:
        opened.add_documents(
            [Document(doc_id, f"shared {doc_id}", metadata=m) for doc_id, m in METADATA.items()],
            parallel=False,
        )
        yield opened


def matching(index: SQLiteIndex, filters: Any) -> set[str]:
    """Ids of the documents a filter lets through."""
    return {hit.doc_id for hit in index.search("shared", filters=filters)}


@pytest.mark.parametrize(
    ("filters", "expected"),
    [
        ({"n": 1}, {"int1"}),  # not the string "1", not the array [1], not true
        ({"n": 1.0}, {"int1"}),
        ({"n": "1"}, {"text1"}),
        ({"flag": True}, {"int1"}),
        ({"flag": False}, {"real"}),
        ({"n": None}, {"null", "missing"}),
        ({"n": [None]}, {"null", "missing"}),
        ({"n": [None, 2.5]}, {"null", "missing", "real"}),
        ({"n": {"$ne": 1}}, set(METADATA) - {"int1"}),
        ({"n": {"$ne": None}}, {"int1", "real", "text1", "big", "array"}),
        ({"tag": {"$nin": ["a", "b"]}}, {"text1", "big", "array"}),
        ({"tag": {"$nin": ["a", None]}}, {"real", "text1", "missing", "array"}),
        ({"n": {"$gt": 1}}, {"real", "big"}),
        ({"n": {"$gte": 1, "$lt": 3}}, {"int1", "real"}),
        ({"tag": {"$lte": "b"}}, {"int1", "real", "null", "missing", "array"}),
        ({"tag": {"$in": []}}, set()),
        ({"$or": [{"tag": "c"}, {"n": 2.5}]}, {"text1", "real"}),
        ({"$and": [{"tag": "a"}, {"$or": [{"n": 1}, {"n": None}]}]}, {"int1", "null"}),
        ({'"file.name"': "a.txt"}, {"big"}),
        ({"file.name": "nested.txt"}, {"big"}),
        ({"n": 2**62}, {"big"}),
    ],
)
def test_filter_semantics(index: SQLiteIndex, filters: Any, expected: set[str]) -> None:
    """Each documented rule, against documents of every value shape."""
    assert matching(index, filters) == expected


@pytest.mark.parametrize(
    "filters",
    [
        {"n": float("nan")},
        {"n": [float("nan")]},
        {"n": float("inf")},
        {"n": 2**63},
        {"n": -(2**63) - 1},
        {"n": 10**30},
        {"n": [10**30]},
        {"n": "a\x00zzz"},
        {"n": ["a\x00zzz"]},
        {"n": {"$gt": None}},
        {"n": {"$gt": True}},
        {"n": {"$like": "a"}},
        {"n": {}},
        {"n": {"$eq": [1]}},
        {"n": {"$in": 1}},
        {"$or": []},
        {"$or": [1]},
        {"$not": [{"n": 1}]},
    ],
)
def test_invalid_filters_raise_invalid_input(index: SQLiteIndex, filters: Any) -> None:
    """Defect 5: these raised raw sqlite3/Overflow errors or matched the wrong documents."""
    with pytest.raises(InvalidInputError):
        index.search("shared", filters=filters)


def test_smallest_64_bit_integer_is_accepted(index: SQLiteIndex) -> None:
    """The range check is inclusive of SQLite's limits."""
    assert matching(index, {"n": -(2**63)}) == set()


def test_nesting_is_bounded() -> None:
    """A deeply nested filter is refused before any recursion limit is reached."""
    deep: dict[str, Any] = {"n": 1}
    for _ in range(MAX_DEPTH + 2):
        deep = {"$and": [deep]}
    with pytest.raises(InvalidInputError, match="nested"):
        parse_filters(deep)


def test_parse_builds_the_expression_tree() -> None:
    """Flat and dialect forms become the same Condition / AllOf / AnyOf tree."""
    assert parse_filters({"a": 1, "b": [2, 3]}) == AllOf(
        (Condition("a", "$eq", 1), Condition("b", "$in", (2, 3)))
    )
    assert parse_filters({"$or": [{"a": {"$eq": 1}}, {"b": {"$nin": [2]}}]}) == AnyOf(
        (Condition("a", "$eq", 1), Condition("b", "$nin", (2,)))
    )
    assert parse_filters({}) is None and parse_filters(None) is None


def test_an_expression_tree_is_accepted_directly(index: SQLiteIndex) -> None:
    """Adapters build Condition / AllOf / AnyOf themselves and the index takes them as is."""
    expr = AnyOf((Condition("tag", "$eq", "c"), Condition("n", "$eq", 2.5)))
    assert matching(index, expr) == {"text1", "real"}
    assert matching(index, AllOf(())) == set(METADATA)
    assert matching(index, AnyOf(())) == set()


def test_conditions_validate_themselves() -> None:
    """A Condition cannot be built with a bad key, operator or value."""
    for key, op, value in [("a b", "$eq", 1), ("a", "$nope", 1), ("a", "$eq", float("nan"))]:
        with pytest.raises(InvalidInputError):
            Condition(key, op, value)


def test_flat_key_addresses_a_literal_key_and_paths_are_quoted() -> None:
    """Dotted flat keys are quoted JSON path labels; plain identifiers stay unquoted."""
    assert flat_key("file.name") == '"file.name"'
    assert flat_key("lang") == "lang"
    assert json_path(flat_key("file.name")) == '$."file.name"'
    assert json_path("source.name") == "$.source.name"
    with pytest.raises(InvalidInputError):
        flat_key('a"b')


def test_compiled_sql_binds_every_value() -> None:
    """Values never appear in the SQL text, only among the parameters."""
    text, params = compile_sqlite(Condition("lang", "$eq", "x' OR 1=1 --"))
    assert "x'" not in text and '["x\' OR 1=1 --"]' in params


def test_a_rejected_filter_leaves_the_index_unchanged(tmp_path: Path) -> None:
    """Validation happens before SQLite sees anything."""
    with SQLiteIndex(tmp_path / "i.sqlite") as fresh:
        fresh.add_documents([Document("d", "shared text", metadata={"n": 1})], parallel=False)
        with pytest.raises(InvalidInputError):
            fresh.allowed_units({"n": float("nan")})
        assert fresh.document_count() == 1
