"""Evidence judges: the contract (`base`), a cache (`cache`), judges by name (`factory`), and
one place per family that knows no other: `llm/` (hosted JEV, OpenAI-compatible servers,
framework chat models), `offline/` (the pool judge), `fakes` (deterministic, for tests)."""

from .base import (
    DEFAULT_INSTRUCTION,
    REASSESS_NOTE,
    Candidate,
    ContextPassage,
    Judge,
    JudgeRequest,
    Usage,
    UsageSnapshot,
)
from .cache import CachedJudge
from .fakes import OverlapJudge, ScriptedJudge
from .llm.jev import JEVJudge, jev_from_env
from .llm.openai_compat import OpenAICompatJudge

__all__ = [
    "DEFAULT_INSTRUCTION",
    "REASSESS_NOTE",
    "CachedJudge",
    "Candidate",
    "ContextPassage",
    "JEVJudge",
    "Judge",
    "JudgeRequest",
    "OpenAICompatJudge",
    "OverlapJudge",
    "ScriptedJudge",
    "Usage",
    "UsageSnapshot",
    "jev_from_env",
]
