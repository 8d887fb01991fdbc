"""Markdown structure SAG2 indexes: ATX headings as each unit's heading path, an H1 as a title.

Only ATX headings (``#`` to ``######`` followed by a space) count; lines inside fenced code
blocks are skipped, so a shell comment in a code sample is not mistaken for a heading.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

HEADING_SEPARATOR = " > "
# Recorded in the index meta (see settings.HEADING_RULE): changing this parser changes results.
_ATX = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.*?)(?:[ \t]+#+)?[ \t]*$")
_FENCE = re.compile(r"^ {0,3}(```|~~~)")
_LINE = re.compile(r"[^\n]*\n?")


@dataclass(frozen=True)
class Heading:
    """One ATX heading: where its line starts in the text, its level (1-6) and its words."""

    offset: int
    level: int
    text: str


def find_headings(text: str) -> list[Heading]:
    """Every ATX heading of the text outside fenced code blocks, in order."""
    found: list[Heading] = []
    fence: str | None = None
    for match in _LINE.finditer(text):
        line = match.group().rstrip("\r\n")
        opening = _FENCE.match(line)
        if opening is not None:
            fence = None if fence == opening.group(1) else fence or opening.group(1)
            continue
        if fence is not None:
            continue
        heading = _ATX.match(line)
        if heading is not None and heading.group(2).strip():
            found.append(Heading(match.start(), len(heading.group(1)), heading.group(2).strip()))
    return found


def first_h1(text: str) -> str:
    """The words of the text's first level-1 heading, or "" when it has none."""
    return next((h.text for h in find_headings(text) if h.level == 1), "")


def unit_heading(outer: str, headings: Sequence[Heading], start: int, end: int) -> str:
    """A unit's heading: the outer path, the path in force at ``start``, then the headings
    that begin inside ``[start, end)``, without repeats.

    A unit cut from the middle of a section keeps the titles of the sections around it; a unit
    spanning several sections lists each of their headings.
    """
    path: dict[int, str] = {}
    inside: list[str] = []
    for heading in headings:
        if heading.offset >= end:
            break
        if heading.offset < start:
            path = {level: words for level, words in path.items() if level < heading.level}
            path[heading.level] = heading.text
        else:
            inside.append(heading.text)
    parts = [part for part in outer.split(HEADING_SEPARATOR) if part.strip()]
    parts += [path[level] for level in sorted(path)] + inside
    return HEADING_SEPARATOR.join(dict.fromkeys(part.strip() for part in parts))
