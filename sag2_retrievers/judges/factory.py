"""Build a judge from a name and a few options, for the command line and the benchmarks."""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass

import httpx

from ..errors import InvalidInputError, JudgeConfigurationError
from .base import Judge
from .cache import CachedJudge
from .fakes import OverlapJudge
from .llm.endpoints import Transport
from .llm.jev import PROVIDERS, JEVJudge, Provider
from .llm.openai_compat import OpenAICompatJudge
from .llm.transports import CHATML, JinjaTemplate, RenderChat, chat_template

JUDGE_NAMES = (
    "local",
    "local-pool",
    "jev",
    "openai",
    "fake",
)
# What ``local`` means: the offline judge that needs no model pass over the corpus and ranks
# best on the train sets (docs/benchmarks.md, "Offline judge v2: the pool judge").
LOCAL_DEFAULT = "local-pool"
# Offline judges retired once the pool judge superseded them (CHANGELOG, issue 34): a name
# someone still uses gets what to use instead, not "unknown judge".
RETIRED_JUDGES = dict.fromkeys(
    ("local-learned", "local-similarity"),
    "the MiniLM judges were retired (the pool judge, `local`, ranks better offline and needs "
    "no model files); use --judge local",
)
OPENAI_BASE_URL_ENV = "SAG2_OPENAI_BASE_URL"
OPENAI_MODEL_ENV = "SAG2_OPENAI_MODEL"
JEV_PROVIDER_ORDER: tuple[Provider, ...] = ("openrouter", "typesafe")
# ``--judge-template server``: the template llama.cpp's llama-server reports at /props.
SERVER_TEMPLATE = "server"
# The openai judge's own defaults: requests in flight per event loop, seconds per attempt.
DEFAULT_SERVER_CONCURRENCY = 8
DEFAULT_SERVER_TIMEOUT = 120.0


@dataclass(frozen=True)
class ServerOptions:
    """How the openai judge talks to its server: transport, grouping, the chat template the
    completions transport renders (a name or a Jinja file), requests in flight and the
    seconds one attempt may take, and whether the instruction goes into the user message.
    The defaults are the judge's own."""

    transport: Transport = "chat"
    group_size: int = 1
    template: str | None = None
    max_concurrency: int | None = None
    timeout: float | None = None
    fold_system: bool = False

    def is_default(self) -> bool:
        """Whether every option keeps its default (as any judge but openai requires)."""
        return self == ServerOptions()


def default_judge_name() -> str:
    """``"jev"`` when a JEV API key (OpenRouter or TypeSafe) is set, else offline ``"local"``."""
    return "jev" if _jev_provider() is not None else "local"


def make_judge(
    name: str,
    *,
    model: str | None = None,
    base_url: str | None = None,
    cache_path: str | None = None,
    server: ServerOptions | None = None,
) -> Judge:
    """The judge called ``name``, wrapped in a judgment cache at ``cache_path`` when given.

    ``model`` and ``base_url`` override the JEV or OpenAI-compatible defaults. ``server`` sets
    how the openai judge talks to its server. A retired judge's name says what to use.
    """
    server = server or ServerOptions()
    if name in RETIRED_JUDGES:
        raise JudgeConfigurationError(f"judge {name!r}: {RETIRED_JUDGES[name]}")
    if name == "openai":
        judge = _openai_judge(model, base_url, server)
    elif not server.is_default():
        raise JudgeConfigurationError(
            "--judge-transport, --judge-group, --judge-template, --judge-concurrency and "
            f"--judge-timeout apply to the openai judge, not {name!r}"
        )
    else:
        judge = _base_judge(name, model=model, base_url=base_url)
    return CachedJudge(judge, cache_path) if cache_path else judge


def _base_judge(name: str, *, model: str | None, base_url: str | None) -> Judge:
    """Dispatch on the judge name."""
    if name == "fake":
        return OverlapJudge()
    if name == "jev":
        return _jev_judge(model, base_url)
    if name == "local":
        name = LOCAL_DEFAULT
    if name == "local-pool":
        return _pool_judge()
    raise InvalidInputError(f"unknown judge {name!r}; choose one of {', '.join(JUDGE_NAMES)}")


def _jev_provider() -> Provider | None:
    """The first JEV provider whose API key variable is set, if any."""
    for provider in JEV_PROVIDER_ORDER:
        if os.environ.get(PROVIDERS[provider].key_env, "").strip():
            return provider
    return None


def _jev_judge(model: str | None, base_url: str | None) -> Judge:
    """A JEV judge for whichever key is set; an error naming both variables when none is."""
    provider = _jev_provider()
    if provider is None:
        names = " or ".join(PROVIDERS[p].key_env for p in JEV_PROVIDER_ORDER)
        raise JudgeConfigurationError(
            f"the jev judge needs an API key: set {names}, or choose another judge "
            "(--judge local runs offline)"
        )
    return JEVJudge(provider=provider, model=model, base_url=base_url)


def _openai_judge(model: str | None, base_url: str | None, server: ServerOptions) -> Judge:
    """An OpenAI-compatible judge; base URL and model from the arguments or the environment."""
    url = base_url or os.environ.get(OPENAI_BASE_URL_ENV, "").strip()
    name = model or os.environ.get(OPENAI_MODEL_ENV, "").strip()
    if not url or not name:
        raise JudgeConfigurationError(
            "the openai judge needs a server and a model: pass --base-url and --model, or set "
            f"{OPENAI_BASE_URL_ENV} and {OPENAI_MODEL_ENV} "
            "(for example http://127.0.0.1:8000 and the served model's name)"
        )
    if server.template is not None and server.transport != "completions":
        raise JudgeConfigurationError(
            "--judge-template applies to --judge-transport completions (the chat transport "
            "leaves the template to the server)"
        )
    return OpenAICompatJudge(
        url,
        name,
        transport=server.transport,
        group_size=server.group_size,
        chat_template=_template(server.template, url),
        max_concurrency=server.max_concurrency or DEFAULT_SERVER_CONCURRENCY,
        timeout=server.timeout or DEFAULT_SERVER_TIMEOUT,
        fold_system=server.fold_system,
    )


def _template(name: str | None, base_url: str) -> RenderChat:
    """ChatML, a named template or file, or the server's own (``server``)."""
    if name is None:
        return CHATML
    if name == SERVER_TEMPLATE:
        return server_template(base_url)
    return chat_template(name)


def server_template(base_url: str) -> RenderChat:
    """The chat template a llama.cpp server reports at ``/props`` (its ``chat_template``),
    named by its digest so judge identities change when the template does."""
    root = base_url.rstrip("/").removesuffix("/v1")
    try:
        reply = httpx.get(f"{root}/props", timeout=30.0, trust_env=False)
        source = reply.json().get("chat_template") if reply.is_success else None
    except (httpx.HTTPError, ValueError, AttributeError):
        source = None
    if not isinstance(source, str) or not source.strip():
        raise JudgeConfigurationError(
            f"the server at {root} reports no chat template at /props (llama.cpp's "
            "llama-server does); name one instead: --judge-template chatml, gemma, llama3, "
            "mistral or a Jinja file"
        )
    digest = hashlib.sha256(source.encode()).hexdigest()[:12]
    return JinjaTemplate(source, f"server-template:{digest}")


def _pool_judge() -> Judge:
    """The default offline judge: trees over the pool's features, numpy only."""
    from .offline.pool import PoolJudge

    return PoolJudge()
