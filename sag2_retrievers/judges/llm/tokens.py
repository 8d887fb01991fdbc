"""Token counts, cached prompt tokens included, from the usage records of chat replies."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

ANTHROPIC_CACHE_FIELDS = ("cache_read_input_tokens", "cache_creation_input_tokens")


@dataclass(frozen=True)
class TokenCounts:
    """A reply's prompt tokens (all of them), the part served from cache, and output tokens;
    ``cache_reported`` is False when the reply says nothing about cached tokens (many local
    servers), which is "not reported", not "nothing cached"."""

    input_tokens: int = 0
    cached_input_tokens: int = 0
    output_tokens: int = 0
    cache_reported: bool = False


def read_token_counts(usage: object) -> TokenCounts:
    """The token counts of a usage record in any of the shapes providers report.

    OpenAI: ``prompt_tokens``, ``prompt_tokens_details.cached_tokens``. Anthropic:
    ``input_tokens`` excludes cache reads and writes, so the prompt is their sum, the cached
    part ``cache_read_input_tokens``. LangChain ``usage_metadata``: ``input_tokens`` (already
    the whole prompt), ``input_token_details.cache_read``. Missing or malformed counts are 0.
    """
    if field_of(usage, "prompt_tokens") is not None:
        cached = field_of(field_of(usage, "prompt_tokens_details"), "cached_tokens")
        return TokenCounts(
            token_count(field_of(usage, "prompt_tokens")),
            token_count(cached),
            token_count(field_of(usage, "completion_tokens")),
            cached is not None,
        )
    cached = field_of(usage, "cache_read_input_tokens")
    prompt = token_count(field_of(usage, "input_tokens"))
    if any(field_of(usage, name) is not None for name in ANTHROPIC_CACHE_FIELDS):
        prompt += token_count(cached) + token_count(field_of(usage, "cache_creation_input_tokens"))
    else:
        cached = field_of(field_of(usage, "input_token_details"), "cache_read")
    output = token_count(field_of(usage, "output_tokens"))
    return TokenCounts(prompt, token_count(cached), output, cached is not None)


def field_of(source: object, name: str) -> object:
    """A key of a mapping or an attribute of an object (SDK replies are objects), or None."""
    if isinstance(source, Mapping):
        return source.get(name)
    return getattr(source, name, None) if source is not None else None


def token_count(value: object) -> int:
    """A reported token count, or 0 when missing or malformed."""
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    return 0
