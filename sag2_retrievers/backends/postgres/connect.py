"""Connecting to PostgreSQL: the connection string kept out of every repr, and connection
failures worded without it (it may hold a password)."""

from __future__ import annotations

from typing import Any

from ...errors import IndexUnavailableError


class ConnectionString:
    """A libpq connection string or URL held for reconnecting; its repr never shows it."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def __repr__(self) -> str:
        return "ConnectionString(<not shown>)"

    def connect(self) -> Any:
        """An autocommit psycopg connection, or an error saying what to install or check."""
        try:
            import psycopg
        except ImportError as error:
            raise IndexUnavailableError(
                "PostgresIndex needs psycopg 3: pip install 'sag2-retrievers[postgres]'"
            ) from error
        try:
            return psycopg.connect(self._value, autocommit=True)
        except psycopg.OperationalError as error:
            raise IndexUnavailableError(
                f"cannot connect to PostgreSQL ({error.__class__.__name__}); check the DSN and "
                "server"
            ) from None
        except psycopg.Error as error:
            # libpq quotes the connection string it could not parse, password and all.
            raise IndexUnavailableError(
                f"cannot connect to PostgreSQL ({error.__class__.__name__}): the connection "
                "string is not valid (it is not shown, as it may hold a password); check its "
                "syntax"
            ) from None
