"""Writing the pages the package produces: never over a file of another kind (the index, a
corpus), and whole or not at all (a temporary file beside the target, renamed over it)."""

from __future__ import annotations

import os
import secrets
from pathlib import Path

from .errors import InvalidInputError
from .input_files import open_regular

# What an HTML page's first bytes (lower-cased, leading whitespace removed) begin with.
_HTML_STARTS = (b"<!doctype html", b"<html")


def require_replaceable_html(path: str | os.PathLike[str]) -> None:
    """Refuse ``path`` as the place of an HTML page when something other than an HTML page is
    there already (an index, a corpus, a folder, a FIFO); a new path or an old page is fine."""
    target = Path(path)
    if not os.path.lexists(target):
        return
    try:
        with open_regular(target) as handle:
            head = handle.read(64)
    except (OSError, InvalidInputError):
        head = b""
    if not head.lstrip().lower().startswith(_HTML_STARTS):
        raise InvalidInputError(
            f"{target} exists and is not an HTML page (an index, a corpus or another file); "
            "it was left as it is: name a new file, or a trace written before"
        )


def write_html_atomically(path: str | os.PathLike[str], page: str) -> None:
    """Write an HTML page to ``path`` whole, refusing to replace anything but an HTML page: a
    reader (or a crash) sees the old page or the new one, never half of one."""
    target = Path(path)
    require_replaceable_html(target)
    partial = target.with_name(f".{target.name}.{secrets.token_hex(6)}.partial")
    # O_EXCL: never open a file someone placed there; 0o666 lets the umask decide the mode.
    descriptor = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        with open(descriptor, "w", encoding="utf-8") as stream:
            stream.write(page)
            stream.flush()
            os.fsync(stream.fileno())
        os.replace(partial, target)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
