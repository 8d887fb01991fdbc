"""A ``_sag2`` value the adapter did not write (core API, CLI JSONL, LangChain) is ignored."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from llama_index.retrievers.sag2 import SAG2Retriever

from sag2_retrievers import Document, SQLiteIndex
from sag2_retrievers.judges import OverlapJudge

FOREIGN_VALUES = [
    "not a mapping",
    7,
    True,
    ["source", "x"],
    {},
    {"source": 3},
    {"source": "x", "offset": "zero"},
    {"source": "x", "offset": True},
    {"source": "x", "offset": -4},
    {"source": "x", "span": "0-9"},
    {"source": "x", "span": [1]},
    {"source": "x", "span": [0, "9"]},
    {"source": "x", "span": None, "excluded_llm_keys": "title"},
    {"source": "x", "excluded_embed_keys": [1, 2]},
    {"source": "x", "excluded_llm_keys": None},
    {"offset": 0, "span": [0, 26]},
]


@pytest.mark.parametrize("foreign", FOREIGN_VALUES)
def test_retrieval_ignores_a_reserved_value_it_did_not_write(tmp_path: Path, foreign: Any) -> None:
    """Issue 22 defect 6: such values raised AttributeError, KeyError, TypeError, IndexError,
    ValueError or ValidationError; the hit is now its own source document."""
    path = tmp_path / "index.sqlite"
    with SQLiteIndex(path) as index:
        text = "Port Varna lies in Ostrel."
        index.add_documents([Document("x", text, metadata={"_sag2": foreign, "k": 1})])
    with SAG2Retriever.from_persist_path(path, judge=OverlapJudge()) as retriever:
        [hit] = retriever.retrieve("Where is Port Varna?")
    assert hit.node.node_id == "x:0-26"
    assert hit.node.source_node is not None and hit.node.source_node.node_id == "x"
    assert hit.node.metadata["k"] == 1 and "_sag2" not in hit.node.metadata
    assert (hit.node.start_char_idx, hit.node.end_char_idx) == (0, 26)
