"""langchain-sag2: SAG2 multi-hop retrieval (sag2-retrievers) as a LangChain retriever.

`LangChainJudge` is imported on first use: a retriever with a sag2 judge never loads the
chat-model judge."""

from importlib import metadata
from typing import TYPE_CHECKING, Any

from langchain_sag2.retrievers import SAG2Retriever

if TYPE_CHECKING:
    from langchain_sag2.judges import LangChainJudge

try:
    __version__ = metadata.version("langchain-sag2")
except metadata.PackageNotFoundError:
    # Running from a source checkout without installing the distribution.
    __version__ = ""

__all__ = ["LangChainJudge", "SAG2Retriever", "__version__"]


def __getattr__(name: str) -> Any:
    """Import `LangChainJudge` when it is first asked for."""
    if name == "LangChainJudge":
        from langchain_sag2.judges import LangChainJudge

        return LangChainJudge
    raise AttributeError(f"module 'langchain_sag2' has no attribute {name!r}")
