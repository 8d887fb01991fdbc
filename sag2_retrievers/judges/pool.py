"""Deprecated alias of `sag2_retrievers.judges.offline.pool` (kept for one release)."""

from ._moved import alias_module
from .offline.pool import *  # noqa: F403 - the names, for type checkers; at run time the alias below

alias_module(__name__, "sag2_retrievers.judges.offline.pool")
