"""Why a connection to a judge's server was never made, in words that say which fix applies.

A host name that does not resolve or an address where nothing listens will not answer a
retry, so the HTTP layer fails at once with this message instead of retrying.
"""

from __future__ import annotations

import socket

import httpx

# What the resolver and the kernel say, for errors that reach httpx only as text.
_NAME_RESOLUTION_WORDS = (
    "name or service not known",
    "temporary failure in name resolution",
    "nodename nor servname",
    "getaddrinfo",
    "no address associated",
)
_REFUSED_WORDS = ("connection refused", "errno 111", "actively refused")


def connect_failure(url: str, error: httpx.ConnectError) -> str:
    """Why no connection was made, in words that say which fix applies: a host name that does
    not resolve (a typo, no network), nothing listening at the address, or another reason."""
    parsed = httpx.URL(url)
    host, port = parsed.host, parsed.port
    address = f"{host}:{port}" if port else host
    chain = _causes(error)
    said = " ".join(str(link).lower() for link in chain)
    if any(isinstance(link, socket.gaierror) for link in chain) or any(
        words in said for words in _NAME_RESOLUTION_WORDS
    ):
        return (
            f"the host name {host!r} could not be resolved (DNS); check the base URL's host "
            "and that this machine has a network connection (not retried)"
        )
    if any(isinstance(link, ConnectionRefusedError) for link in chain) or any(
        words in said for words in _REFUSED_WORDS
    ):
        return (
            f"{address} refused the connection (no server listening there); start the server "
            "or check the base URL's host and port (not retried)"
        )
    return f"could not connect to {address} ({error}); check the base URL (not retried)"


def _causes(error: BaseException) -> list[BaseException]:
    """The error and every error it was raised from, outermost first."""
    chain: list[BaseException] = []
    link: BaseException | None = error
    while link is not None and link not in chain:
        chain.append(link)
        link = link.__cause__ or link.__context__
    return chain
