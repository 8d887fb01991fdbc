"""Where an OpenAI-compatible judge sends its requests, and its settings checked on the way.

The URLs of both transports under a base URL given with or without ``/v1``; whether a URL is
this machine's loopback (the judge's ``sends_data_off_machine``); the transport named.
"""

from __future__ import annotations

import ipaddress
from typing import Literal

import httpx

from ...errors import InvalidInputError
from ._http import check_base_url

Transport = Literal["chat", "completions"]
API_KEY_ENV = "SAG2_OPENAI_API_KEY"
LOOPBACK_NAMES = frozenset({"localhost"})


def api_transport(transport: object, group_size: int) -> Transport:
    """The API transport named by ``transport`` (an httpx transport means chat), checked."""
    api: Transport = "chat"
    if transport == "completions":
        api = "completions"
    elif isinstance(transport, str) and transport != "chat":
        raise InvalidInputError(f"transport must be 'chat' or 'completions', got {transport!r}")
    if not isinstance(group_size, int) or isinstance(group_size, bool) or group_size < 1:
        raise InvalidInputError(f"group_size must be a positive integer, got {group_size!r}")
    if group_size > 1 and api == "completions":
        raise InvalidInputError("group_size needs the chat transport; use one or the other")
    return api


def chat_completions_url(base_url: str) -> str:
    """The chat completions URL under a base URL given with or without ``/v1``."""
    root = base_url.rstrip("/")
    return f"{root}/chat/completions" if root.endswith("/v1") else f"{root}/v1/chat/completions"


def completions_url(base_url: str) -> str:
    """The completions URL under a base URL given with or without ``/v1``."""
    return chat_completions_url(base_url).replace("/chat/completions", "/completions")


def is_loopback_url(url: str) -> bool:
    """Whether the URL's host is this machine's loopback: 127.0.0.0/8, ::1 or localhost."""
    host = httpx.URL(url).host.lower()
    if host in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_settings(base_url: str, model: str, max_concurrency: int, timeout: float) -> None:
    """Raise InvalidInputError for a malformed base URL, an empty model or bad limits."""
    check_base_url(base_url, API_KEY_ENV)
    if not model.strip():
        raise InvalidInputError("model must name the model the server serves, got ''")
    if max_concurrency < 1:
        raise InvalidInputError(f"max_concurrency must be at least 1, got {max_concurrency}")
    if not timeout > 0:
        raise InvalidInputError(f"timeout must be a positive number of seconds, got {timeout}")
