"""FTS5 query text built only from quoted string literals, never from raw user syntax."""

from __future__ import annotations

from collections.abc import Iterable


def quote_term(term: str) -> str:
    """Quote a token or space-separated phrase as an FTS5 string literal ("" escapes ")."""
    return '"' + term.replace('"', '""') + '"'


def or_expression(terms: Iterable[str]) -> str:
    """``"t1" OR "t2" ...`` over distinct terms; empty string when there are none."""
    return " OR ".join(quote_term(term) for term in dict.fromkeys(terms) if term)


def body_expression(term: str) -> str:
    """An expression matching ``term`` in the body column only (for body-level df)."""
    return "body : " + quote_term(term)
