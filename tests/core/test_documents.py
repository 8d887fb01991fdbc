"""Document validation and the chunking rule (ARCHITECTURE §4.2)."""

from __future__ import annotations

from itertools import pairwise
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sag2_retrievers.documents import (
    MAX_TEXT_CHARS,
    MAX_TITLE_CHARS,
    Document,
    Span,
    chunk_spans,
)
from sag2_retrievers.errors import InvalidInputError

TARGET = 100


def pieces(text: str, spans: list[Span]) -> list[str]:
    """The text of each span."""
    return [text[span.start : span.end] for span in spans]


# -- validation ------------------------------------------------------------------------------


def test_valid_document_keeps_its_fields() -> None:
    document = Document("d1", "Some text.", title="A title", metadata={"lang": "en"})
    assert (document.id, document.text, document.title) == ("d1", "Some text.", "A title")
    assert document.metadata == {"lang": "en"}


@pytest.mark.parametrize("doc_id", ["", "   ", 7, None])
def test_id_must_be_a_non_empty_string(doc_id: Any) -> None:
    with pytest.raises(InvalidInputError, match="document id"):
        Document(doc_id, "text")


@pytest.mark.parametrize("text", ["", " \n\t "])
def test_empty_text_is_rejected_naming_the_document(text: str) -> None:
    with pytest.raises(InvalidInputError, match=r"'doc-7'.*empty"):
        Document("doc-7", text)


@pytest.mark.parametrize(
    ("fields", "problem"),
    [
        ({"text": b"bytes"}, "text must be a string"),
        ({"text": "ok", "title": 3}, "title must be a string"),
        ({"text": "a\x00b"}, "text contains a NUL"),
        ({"text": "ok", "title": "a\x00b"}, "title contains a NUL"),
        ({"text": "ok", "metadata": ["not", "a", "mapping"]}, "metadata must be a mapping"),
    ],
)
def test_malformed_fields_are_rejected_naming_the_document(
    fields: dict[str, Any], problem: str
) -> None:
    with pytest.raises(InvalidInputError, match=rf"'doc-7'.*{problem}"):
        Document("doc-7", **fields)


def test_text_longer_than_the_limit_is_rejected_naming_the_document() -> None:
    with pytest.raises(InvalidInputError, match=r"'huge'.*split it first"):
        Document("huge", "a" * (MAX_TEXT_CHARS + 1))


def test_title_longer_than_the_limit_is_rejected_naming_the_document() -> None:
    assert Document("long", "text", title="t" * MAX_TITLE_CHARS).title == "t" * MAX_TITLE_CHARS
    with pytest.raises(InvalidInputError, match=r"'long'.*title has 2,001 characters"):
        Document("long", "text", title="t" * (MAX_TITLE_CHARS + 1))


@pytest.mark.parametrize(
    ("doc_id", "fields", "field"),
    [
        ("doc\ud800", {}, "id"),
        ("doc-7", {"text": "a \udfff b"}, "text"),
        ("doc-7", {"title": "\ud800"}, "title"),
        ("doc-7", {"metadata": {"note": ["ok", "\udc80"]}}, "metadata"),
        ("doc-7", {"metadata": {"\ud800": 1}}, "metadata"),
    ],
)
def test_lone_surrogates_are_rejected_at_construction_naming_the_document(
    doc_id: str, fields: dict[str, Any], field: str
) -> None:
    fields = {"text": "ok", **fields}
    with pytest.raises(InvalidInputError, match=rf"document .*: {field} holds .* lone surrogate"):
        Document(doc_id, **fields)


def test_metadata_is_serialised_to_json_at_construction() -> None:
    document = Document("d1", "text", metadata={"lang": "é", "tags": ["a", 1], "n": None})
    assert document.metadata_json == '{"lang": "é", "tags": ["a", 1], "n": null}'


# -- chunking --------------------------------------------------------------------------------


def test_short_text_is_one_span() -> None:
    text = "word " * 20
    assert chunk_spans(text, TARGET) == [Span(0, len(text.rstrip()))]


def test_text_up_to_one_point_two_targets_stays_whole() -> None:
    text = "a" * int(1.2 * TARGET)
    assert chunk_spans(text, TARGET) == [Span(0, len(text))]


def test_span_edges_never_hold_whitespace() -> None:
    assert chunk_spans("  two words \n", TARGET) == [Span(2, 11)]


def test_whitespace_only_text_gives_no_span() -> None:
    assert chunk_spans(" \n\t ", TARGET) == []


def test_text_without_whitespace_is_cut_at_the_target() -> None:
    text = "x" * 250
    assert chunk_spans(text, TARGET) == [Span(0, 100), Span(100, 200), Span(200, 250)]


def test_long_text_is_cut_between_point_eight_and_one_point_two_targets() -> None:
    text = " ".join(f"word{number}" for number in range(300))
    spans = chunk_spans(text, TARGET)
    assert len(spans) > 5
    assert all(0.8 * TARGET <= span.end - span.start <= 1.2 * TARGET for span in spans[:-1])


def test_paragraph_break_is_preferred_to_a_closer_sentence_end() -> None:
    text = "a" * 85 + "\n\n" + "b" * 10 + ". " + "c" * 100 + " " + "d" * 100
    assert chunk_spans(text, TARGET)[0] == Span(0, 85)


def test_sentence_end_is_preferred_to_whitespace_at_the_target() -> None:
    text = "a" * 88 + ". " + "b" * 9 + " " + "c" * 100 + " " + "d" * 100
    assert chunk_spans(text, TARGET)[0] == Span(0, 89)


def test_whitespace_nearest_the_target_is_chosen_when_there_is_no_sentence_end() -> None:
    text = "a" * 84 + " " + "b" * 13 + " " + "c" * 10 + " " + "d" * 200
    assert chunk_spans(text, TARGET)[0] == Span(0, 98)


def test_trimming_never_leaves_a_chunk_below_point_eight_targets() -> None:
    text = "a" * 17 + "  " + "a" * 4
    spans = chunk_spans(text, 10)
    assert min(span.end - span.start for span in spans[:-1]) >= 8


def test_chinese_full_stop_counts_as_a_sentence_end() -> None:
    text = "这是一个句子。" * 30
    assert chunk_spans(text, 50)[0] == Span(0, 49)


@settings(max_examples=200, deadline=None)
@given(
    st.text(alphabet="ab .!\n\t", min_size=1, max_size=800),
    st.sampled_from([10, 20, 50, 100]),
)
def test_spans_are_ordered_trimmed_and_lose_only_whitespace(text: str, target: int) -> None:
    spans = chunk_spans(text, target)
    gaps = [text[0 : spans[0].start]] if spans else [text]
    gaps += [text[left.end : right.start] for left, right in pairwise(spans)]
    gaps += [text[spans[-1].end :]] if spans else []
    assert all(gap.strip() == "" for gap in gaps)
    assert all(piece and piece == piece.strip() for piece in pieces(text, spans))
    assert all(span.end - span.start <= 1.2 * target for span in spans[:-1])


@settings(max_examples=200, deadline=None)
@given(
    st.text(alphabet="ab .!\n\t", min_size=1, max_size=800),
    st.sampled_from([10, 20, 50, 100]),
)
def test_each_cut_lies_between_point_eight_and_one_point_two_targets(
    text: str, target: int
) -> None:
    """A chunk with the whitespace around it spans 0.8-1.2 targets (whitespace is trimmed)."""
    spans = chunk_spans(text, target)
    previous_ends = [0] + [span.end for span in spans]
    for previous_end, (span, following) in zip(previous_ends, pairwise(spans), strict=False):
        assert span.end - span.start <= 1.2 * target
        assert following.start - previous_end >= 0.8 * target
