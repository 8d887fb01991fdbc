"""A file's title, by one rule for every kind of file: its own first heading (a markdown H1, a
reStructuredText title, an HTML <title>), else its name; a name shared by thousands of files
(README, copyright, __init__.py) is prefixed by its folder's name, so titles tell files apart."""

from __future__ import annotations

import itertools
import re
from pathlib import PurePath

from .html_text import html_title
from .input_files import COMPRESSED_SUFFIXES
from .markdown import first_h1

MARKDOWN_SUFFIXES = frozenset({".md", ".markdown", ".mdx"})
RST_SUFFIXES = frozenset({".rst", ".rest"})
HTML_SUFFIXES = frozenset({".html", ".htm", ".xhtml"})
# Names (before their first dot, lower-cased) that say what a file is but not whose it is.
GENERIC_NAMES = frozenset(
    {
        "readme",
        "copyright",
        "copying",
        "license",
        "licence",
        "notice",
        "authors",
        "credits",
        "thanks",
        "contributing",
        "changelog",
        "changes",
        "news",
        "history",
        "todo",
        "install",
        "index",
        "__init__",
        "__main__",
        "main",
        "setup",
        "conf",
        "config",
        "makefile",
        "version",
        "faq",
        "usage",
    }
)
# reStructuredText adorns a title with a line of one repeated punctuation character.
_ADORNMENT = re.compile(r"^([=\-~^\"'`#*+:._<>])\1{2,}\s*$")
RST_SCAN_LINES = 200


def plain_name(name: str) -> str:
    """A file name without its compression suffix (``changelog.gz``: ``changelog``)."""
    path = PurePath(name)
    return path.stem if path.suffix.lower() in COMPRESSED_SUFFIXES else name


def file_kind(name: str | None) -> str:
    """ "markdown", "rst", "html" or "text", by the name's suffix once decompressed."""
    if name is None:
        return "markdown"  # a text without a file name: a markdown H1 is the best guess
    suffix = PurePath(plain_name(name)).suffix.lower()
    if suffix in MARKDOWN_SUFFIXES:
        return "markdown"
    if suffix in RST_SUFFIXES:
        return "rst"
    return "html" if suffix in HTML_SUFFIXES else "text"


def first_heading(text: str, kind: str) -> str:
    """The text's own title for its kind of file, or "" (plain text has none)."""
    if kind == "markdown":
        return first_h1(text)
    if kind == "rst":
        return rst_title(text)
    return html_title(text) if kind == "html" else ""


def rst_title(text: str) -> str:
    """The first reStructuredText section title among the first lines: a line of words whose
    next line adorns it with at least as many punctuation characters."""
    lines = text.splitlines()[:RST_SCAN_LINES]
    for words, under in itertools.pairwise(lines):
        title = words.strip()
        adorned = _ADORNMENT.match(under) and len(under.strip()) >= len(title)
        if title and adorned and not _ADORNMENT.match(words):
            return title
    return ""


def name_title(name: str, folder: str | None) -> str:
    """A title from a file name: its stem in words, after its folder's name when generic."""
    stem = PurePath(plain_name(name)).stem or name
    words = " ".join(stem.replace("_", " ").split()) or stem
    generic = stem.split(".")[0].lower() in GENERIC_NAMES
    return f"{folder} {words}" if generic and folder else words
