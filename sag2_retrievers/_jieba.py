"""The analyzer's own jieba tokenizer: private to this package, loaded once, safe to fork.

jieba's global tokenizer belongs to the host: a host that teaches it words
(``jieba.add_word``) would change how stored documents analyse again, so deletes would be
refused and question terms would shift. This tokenizer reads jieba's dictionary file
itself, so it shares neither jieba's words nor its global locks.

Loading takes about a second under a lock. A process forked meanwhile would inherit the
lock held by a thread it does not have, and its first Han text would wait for ever (the
analysis pool forks at the first large batch). So every fork waits for a load in progress
to finish, and the child starts with a fresh lock.
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import threading
from typing import Any

_lock = threading.Lock()
_tokenizer: Any = None


def tokenizer() -> Any:
    """The package's jieba tokenizer, loaded on first use (quietly, once per process)."""
    loaded = _tokenizer
    if loaded is None:
        with _lock:
            loaded = _tokenizer if _tokenizer is not None else _load()
    return loaded


def _load() -> Any:
    """Build a tokenizer on jieba's own dictionary file (call with the lock held)."""
    global _tokenizer
    import jieba

    jieba.setLogLevel(logging.WARNING)
    dictionary = os.path.join(os.path.dirname(jieba.__file__), jieba.DEFAULT_DICT_NAME)
    loaded = jieba.Tokenizer(dictionary)
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        loaded.initialize()
    _tokenizer = loaded
    return loaded


def _wait_for_load() -> None:
    """Before a fork: take the lock, so no load is half done in the child."""
    _lock.acquire()


def _release_after_fork() -> None:
    """After a fork, in the parent: let loads go on."""
    _lock.release()


def _renew_lock_in_child() -> None:
    """After a fork, in the child: a new, free lock (the inherited one stays held)."""
    global _lock
    _lock = threading.Lock()


if hasattr(os, "register_at_fork"):  # POSIX; elsewhere processes are spawned, not forked
    os.register_at_fork(
        before=_wait_for_load,
        after_in_parent=_release_after_fork,
        after_in_child=_renew_lock_in_child,
    )
