"""API keys: checked when read, and never shown in reprs, errors or any library's logs.

A key with a trailing newline or an inner control character makes httpx refuse the header
and print it in its error, and a non-ASCII key fails to encode; so keys are stripped and
checked where they are read. httpcore logs response headers at DEBUG, so a server that echoes
``Authorization`` would put the key in the logs: a filter on the HTTP libraries' loggers
replaces every live key in their records.
"""

from __future__ import annotations

import json
import logging
import urllib.parse
import weakref
from collections.abc import Iterable

from ...errors import JudgeConfigurationError

REDACTED = "[redacted]"
# Every logger httpx 0.2x and httpcore 1.x write to (a logger's filter does not reach its
# children, so each is named).
HTTP_LOGGERS = (
    "httpx",
    "httpcore",
    "httpcore.connection",
    "httpcore.http11",
    "httpcore.http2",
    "httpcore.proxy",
    "httpcore.socks",
)


class Secret:
    """A string such as an API key that never shows itself in repr, str or logs."""

    __slots__ = ("__weakref__", "_value")

    def __init__(self, value: str) -> None:
        self._value = value
        _live_secrets.add(self)

    def reveal(self) -> str:
        """Return the secret itself, only for building the request that needs it."""
        return self._value

    def __repr__(self) -> str:
        return f"Secret({REDACTED!r})"

    __str__ = __repr__


_live_secrets: weakref.WeakSet[Secret] = weakref.WeakSet()


def read_key(value: str, source: str) -> Secret:
    """A key as read from ``source``: surrounding whitespace removed, and refused (without
    showing it) if it holds a character an HTTP header cannot carry."""
    key = value.strip()
    for character in key:
        if not " " <= character <= "~":
            kind = "a control" if character.isascii() else "a non-ASCII"
            raise JudgeConfigurationError(
                f"the API key from {source} holds {kind} character (the key is not shown); "
                "copy the key again without line breaks or other invisible characters"
            )
    return Secret(key)


def redact(text: str, secrets: Iterable[Secret]) -> str:
    """Replace every occurrence of the secrets in text, as they are or in any encoding a
    server might echo them in (percent-encoded, JSON-escaped), so no echo can leak a key."""
    for secret in secrets:
        for spelling in encodings(secret.reveal()):
            text = text.replace(spelling, REDACTED)
    return text


def encodings(key: str) -> list[str]:
    """The key and the ways a server may spell it back, longest first (so a longer spelling
    is replaced whole before a shorter one inside it): percent-encoding in either case of hex
    digit, with ``+`` for spaces or not, and JSON escapes (with ``/`` escaped or not, and
    ``\\u`` escapes for every character)."""
    if not key:
        return []
    percent = {
        urllib.parse.quote(key, safe=""),
        urllib.parse.quote(key, safe="/"),
        urllib.parse.quote_plus(key, safe=""),
        urllib.parse.quote_plus(key, safe="/"),
    }
    percent |= {_lower_hex(spelling) for spelling in percent}
    escaped = json.dumps(key)[1:-1]
    spellings = {key, escaped, escaped.replace("/", "\\/"), *percent}
    spellings.add("".join(f"\\u{ord(character):04x}" for character in key))
    return sorted(spellings, key=len, reverse=True)


def _lower_hex(percent_encoded: str) -> str:
    """A percent-encoded string with its hex digits in lower case (%2f, not %2F)."""
    parts = percent_encoded.split("%")
    return parts[0] + "".join(f"%{part[:2].lower()}{part[2:]}" for part in parts[1:])


class RedactingFilter(logging.Filter):
    """Replaces every live key in a log record's message (it never drops a record)."""

    def filter(self, record: logging.LogRecord) -> bool:
        """Rewrite the record's message if it holds a key."""
        secrets = list(_live_secrets)
        if not secrets:
            return True
        message = record.getMessage()
        redacted = redact(message, secrets)
        if redacted != message:
            record.msg, record.args = redacted, None
        return True


def guard_http_logs() -> None:
    """Put one `RedactingFilter` on each HTTP library logger (idempotent)."""
    for name in HTTP_LOGGERS:
        target = logging.getLogger(name)
        if not any(isinstance(existing, RedactingFilter) for existing in target.filters):
            target.addFilter(RedactingFilter())


guard_http_logs()
