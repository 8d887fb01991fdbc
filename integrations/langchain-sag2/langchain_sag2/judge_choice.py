"""Which judge a retriever gets, and whose run the judge's model calls belong to, without
importing the chat-model judge until a chat model is actually given (a retriever with a
sag2 judge never loads it)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from langchain_core.callbacks import Callbacks

from sag2_retrievers import Judge

# The callbacks of the retrieval run under way, so the judge's model calls become its children.
RUN_CALLBACKS: ContextVar[Callbacks] = ContextVar("sag2_langchain_run_callbacks", default=None)


def as_judge(judge: object) -> Judge | None:
    """A judge as given, a LangChain chat model wrapped in `LangChainJudge`, or None."""
    if judge is None or isinstance(judge, Judge):
        return judge
    if _is_chat_model(judge):
        from .judges import LangChainJudge

        return LangChainJudge(judge)  # type: ignore[arg-type]
    raise TypeError(
        "judge must be a sag2_retrievers Judge (JEVJudge, OpenAICompatJudge, LocalJudge, "
        "CachedJudge, ...), a LangChainJudge, or a LangChain BaseChatModel to wrap in one; "
        f"got {type(judge).__name__}"
    )


def _is_chat_model(value: object) -> bool:
    """Whether a value is a LangChain chat model: if one exists, its module is loaded."""
    models = sys.modules.get("langchain_core.language_models")
    return models is not None and isinstance(value, models.BaseChatModel)


@contextmanager
def judge_callbacks(callbacks: Callbacks) -> Iterator[None]:
    """Make judge calls in this task (and the tasks it starts) children of ``callbacks``' run."""
    token = RUN_CALLBACKS.set(callbacks)
    try:
        yield
    finally:
        RUN_CALLBACKS.reset(token)
