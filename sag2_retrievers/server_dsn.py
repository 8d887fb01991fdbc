"""Which --db strings name a PostgreSQL server (a URL, or a libpq ``key=value`` string) and how
one may be printed: never its password, and nothing at all of one that does not parse cleanly."""

from __future__ import annotations

import re
import urllib.parse

URL_SCHEMES = ("postgresql://", "postgres://")
# The libpq keywords (PostgreSQL 16); a --db string starting with one followed by "=" is a
# key=value connection string, not a file name.
LIBPQ_KEYWORDS = frozenset(
    [
        "host",
        "hostaddr",
        "port",
        "dbname",
        "user",
        "password",
        "passfile",
        "channel_binding",
        "connect_timeout",
        "client_encoding",
        "options",
        "application_name",
        "fallback_application_name",
        "keepalives",
        "keepalives_idle",
        "keepalives_interval",
        "keepalives_count",
        "tcp_user_timeout",
        "replication",
        "gssencmode",
        "sslmode",
        "requiressl",
        "sslcompression",
        "sslcert",
        "sslkey",
        "sslpassword",
        "sslcertmode",
        "sslrootcert",
        "sslcrl",
        "sslcrldir",
        "sslsni",
        "requirepeer",
        "ssl_min_protocol_version",
        "ssl_max_protocol_version",
        "krbsrvname",
        "gsslib",
        "gssdelegation",
        "service",
        "target_session_attrs",
        "load_balance_hosts",
    ]
)
# The keywords a printed key=value string keeps: where the server is and who connects.
SHOWN_KEYWORDS = ("host", "hostaddr", "port", "dbname", "user")
_FIRST_KEYWORD = re.compile(r"\s*([A-Za-z_]+)\s*=")
# One libpq setting: a keyword, "=", and a value, single-quoted (backslash escapes) or bare.
_SETTING = re.compile(r"\s*([A-Za-z_]+)\s*=\s*('(?:[^'\\]|\\.)*'|(?:[^\s'\\]|\\.)+)\s*")
_HIDDEN_URL = "{scheme}://... (a malformed URL, not shown)"
_HIDDEN_SETTINGS = "a PostgreSQL connection string (malformed, not shown)"


def is_server(db: str) -> bool:
    """Whether --db names a PostgreSQL server rather than an SQLite file."""
    if db.startswith(URL_SCHEMES):
        return True
    first = _FIRST_KEYWORD.match(db)
    return first is not None and first.group(1) in LIBPQ_KEYWORDS


def shown(db: str) -> str:
    """--db as it may be printed: a file path as given; a server's URL as scheme, user, host,
    port and database only; a key=value string as its host, port, dbname and user only; and
    either, when it does not parse cleanly, as no more than what kind of string it is."""
    if not is_server(db):
        return db
    if db.startswith(URL_SCHEMES):
        return _shown_url(db)
    return _shown_settings(db)


def _shown_url(url: str) -> str:
    """A URL without its password, query and fragment; a URL whose parts are ambiguous (an
    unclosed IPv6 bracket, a port that is not a number, an "@" after the host, as when a
    password holds a "/") is not shown at all."""
    scheme = url.split("://", 1)[0]
    try:
        parts = urllib.parse.urlsplit(url)
        port = parts.port
    except ValueError:
        return _HIDDEN_URL.format(scheme=scheme)
    if "@" in parts.path + parts.query + parts.fragment:
        return _HIDDEN_URL.format(scheme=scheme)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    user = f"{parts.username}@" if parts.username else ""
    netloc = f"{user}{host}" + (f":{port}" if port else "")
    return urllib.parse.urlunsplit((scheme, netloc, parts.path, "", ""))


def _shown_settings(settings: str) -> str:
    """A key=value string as its location and user settings, or only its kind if any part
    of it does not parse as a setting."""
    found: dict[str, str] = {}
    position = 0
    while position < len(settings):
        setting = _SETTING.match(settings, position)
        if setting is None:
            return _HIDDEN_SETTINGS
        found[setting.group(1)] = setting.group(2)
        position = setting.end()
    kept = [f"{name}={found[name]}" for name in SHOWN_KEYWORDS if name in found]
    return " ".join(kept) or _HIDDEN_SETTINGS
