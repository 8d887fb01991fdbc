"""Reading the files users hand the CLI: regular files only, a size limit kept while reading,
byte-order marks, a fallback encoding, and JSON parsing whose every failure names the file and
what to do."""

from __future__ import annotations

import bz2
import codecs
import gzip
import io
import json
import lzma
import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

from .errors import InvalidInputError

# A file read whole (a JSON corpus, a text file, a questions file, a report) must fit in this
# many bytes; larger corpora go in JSONL, read line by line, whose lines have the same bound.
MAX_FILE_BYTES = 128 * 2**20
SNIFF_BYTES = 8192
# Compressed text files are read through their decompressor, and MAX_FILE_BYTES bounds the
# decompressed bytes: a small bomb stops at the bound instead of filling memory.
COMPRESSED_SUFFIXES = frozenset({".gz", ".bz2", ".xz"})
# A file's content as read: the file itself, or the stream of its decompressor.
Content = io.BufferedReader | gzip.GzipFile | bz2.BZ2File | lzma.LZMAFile
# Longest first: the UTF-32 little-endian mark begins with the UTF-16 one.
_BYTE_ORDER_MARKS = (
    (codecs.BOM_UTF32_LE, "utf-32"),
    (codecs.BOM_UTF32_BE, "utf-32"),
    (codecs.BOM_UTF8, "utf-8-sig"),
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
)


class UndecodableFileError(InvalidInputError):
    """A file (or a line of it) is neither UTF-8, marked by a byte-order mark, nor readable in
    the fallback encoding given."""


def checked_encoding(name: str | None) -> str | None:
    """A fallback encoding's canonical name, refusing names Python does not know."""
    if name is None:
        return None
    try:
        return codecs.lookup(name).name
    except LookupError:
        raise InvalidInputError(
            f"unknown encoding {name!r}; use a Python codec name such as latin-1 or cp1252"
        ) from None


class NotRegularFileError(InvalidInputError):
    """A path names a FIFO, a device, a socket or a folder where a file's content is read."""


def open_regular(path: Path) -> io.BufferedReader:
    """A file opened for reading, refused before a byte is read unless it is a regular file:
    a FIFO with no writer would block for ever and /dev/zero never ends. The open does not
    block (O_NONBLOCK), so the check is made on what was opened, not on a name checked first."""
    descriptor = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    try:
        if not stat.S_ISREG(os.fstat(descriptor).st_mode):
            raise NotRegularFileError(
                f"{path}: not a regular file (a FIFO, a device, a socket or a folder); "
                "give a file, or copy the stream to one first"
            )
        os.set_blocking(descriptor, True)
        return open(descriptor, "rb")
    except BaseException:
        os.close(descriptor)
        raise


class DamagedFileError(InvalidInputError):
    """A .gz, .bz2 or .xz file whose content its decompressor cannot read."""


class TooLargeFileError(InvalidInputError):
    """A file read whole, or one line of a file read line by line, is above the size bound."""


def is_compressed(path: Path) -> bool:
    """Whether a file is read through a decompressor (by its suffix)."""
    return path.suffix.lower() in COMPRESSED_SUFFIXES


def read_bounded(path: Path) -> bytes:
    """A regular file's bytes (decompressed when compressed), refused once more than
    MAX_FILE_BYTES are read: the bound is kept while reading, so neither a file that grows
    meanwhile nor a compressed one that expands without end is read past it."""
    raw = read_content(path, MAX_FILE_BYTES + 1)
    if len(raw) > MAX_FILE_BYTES:
        size = (
            f"over {MAX_FILE_BYTES:,} bytes once decompressed"
            if is_compressed(path)
            else f"{max(path.stat().st_size, len(raw)):,} bytes"
        )
        raise TooLargeFileError(
            f"{path}: too large: {size}, limit {MAX_FILE_BYTES:,} bytes for a file read whole; "
            "split it, or write the corpus as JSONL (read line by line)"
        )
    return raw


def read_content(path: Path, size: int) -> bytes:
    """Up to ``size`` bytes of a file's content, through its decompressor when compressed."""
    with open_content(path) as stream:
        return stream.read(size)


@contextmanager
def open_content(path: Path) -> Iterator[Content]:
    """A regular file's content as a stream, through its decompressor when compressed; the
    decompressor's failure, whenever the stream is read, is a DamagedFileError naming it."""
    with open_regular(path) as handle:
        if not is_compressed(path):
            yield handle
            return
        try:
            with _decompressing(handle, path.suffix.lower()) as stream:
                yield stream
        except (OSError, EOFError, lzma.LZMAError) as error:
            raise DamagedFileError(
                f"{path}: not a readable {path.suffix} file ({error}); it may be truncated"
            ) from None


def read_text(path: Path, fallback: str | None = None) -> str:
    """A whole file as text: by its byte-order mark, else UTF-8, else ``fallback``."""
    return decoded(read_bounded(path), str(path), fallback)


def decoded(raw: bytes, where: str, fallback: str | None = None) -> str:
    """Bytes as text: by a leading byte-order mark, else UTF-8, else ``fallback``."""
    marked = next((name for mark, name in _BYTE_ORDER_MARKS if raw.startswith(mark)), None)
    try:
        return raw.decode(marked or "utf-8")
    except UnicodeDecodeError as error:
        if fallback is None or marked is not None:
            kind = marked.upper() if marked else "UTF-8"
            raise UndecodableFileError(
                f"{where}: not valid {kind} text (byte {error.start}); save it as UTF-8 or "
                "name its encoding (sag2 index --encoding latin-1, for example)"
            ) from None
    try:
        return raw.decode(fallback)
    except UnicodeDecodeError as error:
        raise UndecodableFileError(
            f"{where}: neither UTF-8 nor {fallback} text (byte {error.start}); "
            "name the file's own encoding with --encoding"
        ) from None


def text_lines(path: Path, fallback: str | None = None) -> Iterator[tuple[int, str]]:
    """Number and text of each line, each at most MAX_FILE_BYTES long; UTF-16/32 files (with a
    byte-order mark) are decoded as a stream, others line by line."""
    with open_content(path) as handle:
        marked = next(
            (name for mark, name in _BYTE_ORDER_MARKS if handle.peek(4).startswith(mark)), None
        )
        if marked is not None and marked != "utf-8-sig":
            yield from _stream_lines(io.TextIOWrapper(handle, encoding=marked), path)
            return
        for number, raw in enumerate(_bounded_lines(handle, path), start=1):
            yield number, decoded(raw, f"{path}: line {number}", fallback).removeprefix("\ufeff")


def _bounded_lines(handle: Content, path: Path) -> Iterator[bytes]:
    """Raw lines, refusing one longer than MAX_FILE_BYTES before holding more of it."""
    number = 0
    while raw := handle.readline(MAX_FILE_BYTES + 1):
        number += 1
        if len(raw) > MAX_FILE_BYTES:
            raise TooLargeFileError(
                f"{path}: line {number} is longer than {MAX_FILE_BYTES:,} bytes; split the record"
            )
        yield raw


def _stream_lines(stream: io.TextIOWrapper, path: Path) -> Iterator[tuple[int, str]]:
    """Lines of a text stream, numbered, each bounded like a raw line."""
    number = 0
    try:
        while line := stream.readline(MAX_FILE_BYTES + 1):
            number += 1
            if len(line) > MAX_FILE_BYTES:
                raise TooLargeFileError(f"{path}: line {number} is too long; split the record")
            yield number, line
    except UnicodeDecodeError as error:
        raise UndecodableFileError(
            f"{path}: line {number + 1}: not valid {stream.encoding.upper()} text "
            f"({error.reason}); save it as UTF-8"
        ) from None


def parse_json(text: str, where: str, hint: str = "check the file") -> Any:
    """Parse JSON text; syntax errors, nesting too deep for the parser and numbers too long to
    convert all become one InvalidInputError naming ``where``."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        raise InvalidInputError(f"{where}: not valid JSON ({error}); {hint}") from None
    except RecursionError:
        raise InvalidInputError(f"{where}: JSON nested too deeply to read; {hint}") from None
    except ValueError as error:
        # Integers beyond Python's digit limit (sys.get_int_max_str_digits) land here.
        raise InvalidInputError(f"{where}: JSON value cannot be read ({error})") from None


def read_json(path: Path, hint: str = "check the file") -> Any:
    """A whole JSON file (size-checked, UTF-8 or marked by a byte-order mark), parsed."""
    return parse_json(read_text(path), str(path), hint)


def _decompressing(handle: IO[bytes], suffix: str) -> Content:
    """A stream of the decompressed bytes of an open .gz, .bz2 or .xz file."""
    if suffix == ".gz":
        return gzip.GzipFile(fileobj=handle)
    return bz2.BZ2File(handle) if suffix == ".bz2" else lzma.LZMAFile(handle)


def looks_binary(path: Path) -> bool:
    """Whether a file's first bytes (decompressed) hold a NUL outside a UTF-16/32 text
    (images, archives, a compressed tar)."""
    head = read_content(path, SNIFF_BYTES)
    if any(head.startswith(mark) for mark, name in _BYTE_ORDER_MARKS):
        return False
    return b"\x00" in head


def within(path: Path, folder: Path) -> bool:
    """Whether a resolved ``path`` lies inside a resolved ``folder``."""
    return os.path.commonpath([path, folder]) == str(folder)


def printable_path(path: str) -> str:
    """A path as valid text: bytes of a file name that are not UTF-8 (which os.walk hands over
    as lone surrogates) become ``\\xNN`` escapes, so an id made of it is storable and stable.
    A literal backslash is doubled first, so a name spelling out an escape (``bad\\xff``) and
    one holding that byte get different ids (a backslash is never part of a UTF-8 sequence)."""
    return os.fsencode(path).replace(b"\\", b"\\\\").decode("utf-8", "backslashreplace")
