"""langchain-sag2: SAG2 multi-hop retrieval (sag2-retrievers) as a LangChain retriever."""

from importlib import metadata

from langchain_sag2.judges import LangChainJudge
from langchain_sag2.retrievers import SAG2Retriever

try:
    __version__ = metadata.version("langchain-sag2")
except metadata.PackageNotFoundError:
    # Running from a source checkout without installing the distribution.
    __version__ = ""

__all__ = ["LangChainJudge", "SAG2Retriever", "__version__"]
