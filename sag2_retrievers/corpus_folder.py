"""A folder as a corpus: which files are read, as what, and a tally of every file skipped.

Inside a folder only .json/.jsonl/.ndjson files (compressed or not) are corpora (a .json file
that is not one is read as text, with a note); every other file that is not binary is one text
document (a README starting with "[" is text, not a JSON guess), and .gz/.bz2/.xz files
decompressed when asked."""

from __future__ import annotations

import os
from collections.abc import Callable, Generator, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from .corpus_io import (
    CORPUS_SUFFIXES,
    BlankFileError,
    NotACorpusError,
    read_corpus,
    text_document,
)
from .documents import Document
from .errors import InvalidInputError
from .file_titles import plain_name
from .id_claims import IdClaims
from .input_files import (
    DamagedFileError,
    NotRegularFileError,
    TooLargeFileError,
    UndecodableFileError,
    is_compressed,
    looks_binary,
    printable_path,
    within,
)

# Files of these kinds are never text, whatever their first bytes hold.
BINARY_SUFFIXES = frozenset(
    [
        ".zst",
        ".zip",
        ".tar",
        ".tgz",
        ".7z",
        ".png",
        ".jpg",
        ".jpeg",
        ".gif",
        ".webp",
        ".ico",
        ".pdf",
        ".so",
        ".o",
        ".a",
        ".pyc",
        ".exe",
        ".dll",
        ".sqlite",
        ".db",
        ".woff",
        ".woff2",
        ".ttf",
        ".otf",
        ".mp3",
        ".mp4",
        ".wav",
        ".ogg",
    ]
)
SKIP_REASONS = {
    "hidden": "hidden",
    "binary": "binary",
    "blank": "blank",
    "compressed": "compressed (--read-compressed reads them)",
    "glob": "not matching --glob",
    "outside": "a symlink to a file outside the folder",
    "undecodable": "not UTF-8 text",
    "invalid": "not a valid corpus file",
    "refused": "not storable as a document",
    "too_large": "too large",
    "special": "not a regular file",
    "unopenable": "could not be read",
    "damaged": "a damaged compressed file",
}
# Reasons the command fails for (after every other file is indexed) unless told to skip.
UNREADABLE = ("undecodable", "invalid", "refused", "too_large", "unopenable", "damaged")


@dataclass
class FolderTally:
    """What a folder walk found, filled in as the documents are read: files read, the files
    skipped (relative paths, in path order) by reason, the error of each unreadable one, a
    note on each .json file read as text; ``on_skip`` hears of each skip."""

    read: int = 0
    skipped: dict[str, list[str]] = field(default_factory=dict)
    problems: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    on_skip: Callable[[int], None] | None = None

    def skip(self, reason: str, relative: str) -> None:
        """Count one file skipped."""
        self.skipped.setdefault(reason, []).append(relative)
        if self.on_skip is not None:
            self.on_skip(1)

    def summary(self) -> str:
        """ "N files read, M skipped (a binary, b blank, ...)" for the ingest's last line."""
        parts = [f"{len(files):,} {SKIP_REASONS[why]}" for why, files in self.skipped.items()]
        skipped = sum(len(files) for files in self.skipped.values())
        as_text = f" ({len(self.notes):,} .json as text)" if self.notes else ""
        return f"{self.read:,} files read{as_text}, {skipped:,} skipped" + (
            f" ({', '.join(parts)})" if parts else ""
        )


@dataclass(frozen=True)
class FolderCorpus:
    """A folder to read: its resolved path, the --glob patterns (none: every text file), the
    encoding of text files that are not UTF-8 (none: they are tallied, not read) and whether
    .gz/.bz2/.xz files are read decompressed (by default they are counted as skipped)."""

    folder: Path
    globs: Sequence[str] = ()
    fallback: str | None = None
    read_compressed: bool = False

    @classmethod
    def at(
        cls,
        folder: Path,
        globs: Sequence[str] = (),
        fallback: str | None = None,
        *,
        read_compressed: bool = False,
    ) -> FolderCorpus:
        """The folder however it was spelled (relative, absolute, through ``..``), resolved."""
        if not folder.is_dir():
            raise InvalidInputError(f"folder {str(folder)!r} does not exist or is not a folder")
        return cls(folder.resolve(), tuple(globs), fallback, read_compressed)

    def files(self, tally: FolderTally) -> list[tuple[str, Path]]:
        """Every file under the folder as (relative posix path, path), in path order; a hidden
        folder is one entry (``.git/``), not walked. Folder symlinks are not followed, so no
        loop and no outside folder is walked. The walk keeps its own stack of folders (no
        recursion, whatever the depth); a folder that cannot be listed goes in ``tally``."""
        found = []
        pending = [self.folder]
        while pending:
            folder = pending.pop()
            try:
                with os.scandir(folder) as entries:
                    for entry in entries:
                        found += self._walked(entry, pending)
            except OSError as error:  # permission denied, removed meanwhile, an I/O error
                relative, _ = self._entry(folder, "/")
                tally.problems[relative] = (
                    f"{relative!r}: {error.strerror or error} (a folder: nothing in it was read)"
                )
                tally.skip("unopenable", relative)
        return sorted(found)

    def _walked(self, entry: os.DirEntry[str], pending: list[Path]) -> list[tuple[str, Path]]:
        """One entry of a folder: a file as itself, a hidden folder as one entry, and a folder
        pushed on ``pending`` (a symlink to a folder is neither listed nor followed)."""
        path = Path(entry.path)
        if not _is_folder(entry):
            return [self._entry(path)]
        if entry.name.startswith("."):
            return [self._entry(path, "/")]
        if not entry.is_symlink():
            pending.append(path)
        return []

    def _entry(self, path: Path, suffix: str = "") -> tuple[str, Path]:
        """A path with its printable path relative to the folder."""
        return printable_path(path.relative_to(self.folder).as_posix() + suffix), path

    def documents(
        self, files: list[tuple[str, Path]], tally: FolderTally, claims: IdClaims
    ) -> Iterator[Document]:
        """The documents of the files kept (of ``files``), counting the rest in ``tally`` and
        keeping out (in ``claims``) a record whose id an earlier one of the run has."""
        for relative, path in files:
            try:
                reason = self._skip_reason(relative, path)
                if reason is None:
                    reason = yield from self._read(relative, path, tally, claims)
            except NotRegularFileError:  # replaced by a FIFO or a device since the walk
                reason = "special"
            except InvalidInputError as error:  # damaged, too large, not a corpus or a document
                tally.problems[relative] = _relative_message(error, path, relative)
                reason = _unreadable_reason(error, _is_corpus(path))
            except OSError as error:  # permission denied, removed meanwhile, an I/O error
                tally.problems[relative] = f"{relative!r}: {error.strerror or error}"
                reason = "unopenable"
            if reason is None:
                tally.read += 1
            else:
                tally.skip(reason, relative)

    def _skip_reason(self, relative: str, path: Path) -> str | None:
        """Why a file is not read, before reading it, or None."""
        if any(part.startswith(".") for part in relative.rstrip("/").split("/")):
            return "hidden"
        if path.is_symlink():
            target = _link_target(path)
            if target is None:
                return "special"
            if not within(target, self.folder):
                return "outside"
            if any(part.startswith(".") for part in target.relative_to(self.folder).parts):
                return "hidden"  # config.txt -> .env is as hidden as .env
        if not path.is_file():
            return "special"  # a socket, a fifo or a dangling link: nothing to read
        if self.globs and not any(PurePosixPath(relative).match(g) for g in self.globs):
            return "glob"
        if path.suffix.lower() in BINARY_SUFFIXES:
            return "binary"
        if not self.read_compressed and is_compressed(path):
            return "compressed"
        return "binary" if looks_binary(path) else None

    def _read(
        self, relative: str, path: Path, tally: FolderTally, claims: IdClaims
    ) -> Generator[Document, None, str | None]:
        """Yield a file's documents; return why it was skipped (blank, undecodable); a file
        refused otherwise raises, for ``documents`` to tally."""
        if _is_corpus(path):
            try:
                yield from claims.kept(read_corpus(path, self.fallback), relative)
                return None
            except NotACorpusError as error:
                tally.notes.append(
                    f"{_relative_message(error, path, relative)}; read as one text document"
                )
        try:
            document = text_document(path, self.folder, relative, self.fallback)
        except BlankFileError:
            return "blank"
        except UndecodableFileError:
            return "undecodable"
        yield from claims.kept([document], relative)
        return None


def _is_corpus(path: Path) -> bool:
    """Whether a file of the folder is read as a corpus: by its suffix once decompressed."""
    return Path(plain_name(path.name)).suffix.lower() in CORPUS_SUFFIXES


def _unreadable_reason(error: InvalidInputError, corpus: bool) -> str:
    """The tally's reason for a file refused while it was read."""
    if isinstance(error, DamagedFileError):
        return "damaged"
    if isinstance(error, TooLargeFileError):
        return "too_large"
    if isinstance(error, UndecodableFileError):
        return "undecodable"
    return "invalid" if corpus else "refused"


def _relative_message(error: InvalidInputError, path: Path, relative: str) -> str:
    """An error about a file of the folder, naming it by its path inside the folder as every
    other warning of the run does."""
    return str(error).replace(str(path), repr(relative), 1)


def _is_folder(entry: os.DirEntry[str]) -> bool:
    """Whether an entry is a folder or a symlink to one; a symlink loop is not (it is a file
    the tally counts as special)."""
    try:
        return entry.is_dir()
    except OSError:
        return False


def _link_target(link: Path) -> Path | None:
    """Where a symlink ends, or None for a loop (Python 3.11 raises RuntimeError, later ones
    OSError)."""
    try:
        return link.resolve()
    except (OSError, RuntimeError):
        return None
