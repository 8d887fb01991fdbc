"""Evidence judges: the contract, deterministic fakes, hosted JEV, self-hosted LLMs, a cache."""

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
