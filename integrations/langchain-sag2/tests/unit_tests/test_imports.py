"""The package's public names are exactly these."""

from langchain_sag2 import __all__

EXPECTED_ALL = ["LangChainJudge", "SAG2Retriever", "__version__"]


def test_all_imports() -> None:
    """Adding or removing a public name must be a deliberate change to this list."""
    assert sorted(EXPECTED_ALL) == sorted(__all__)
