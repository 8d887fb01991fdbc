"""The module paths issue 34 moved still import for one release, warn, and are the moved
modules themselves (so a patch through the old path reaches the code that reads it)."""

from __future__ import annotations

import importlib
import sys
import warnings

import pytest

MOVED = {
    "sag2_retrievers.judges.pool": "sag2_retrievers.judges.offline.pool",
    "sag2_retrievers.judges.chat": "sag2_retrievers.judges.llm.chat",
    "sag2_retrievers.judges.prompts": "sag2_retrievers.judges.llm.prompts",
    "sag2_retrievers.judges.tokens": "sag2_retrievers.judges.llm.tokens",
    "sag2_retrievers.judges.openai_compat": "sag2_retrievers.judges.llm.openai_compat",
}


@pytest.mark.parametrize(("old", "new"), sorted(MOVED.items()))
def test_old_judge_path_warns_and_is_the_moved_module(old: str, new: str) -> None:
    sys.modules.pop(old, None)
    with pytest.warns(DeprecationWarning, match=new):
        aliased = importlib.import_module(old)
    assert aliased is importlib.import_module(new)


def test_patching_through_the_old_pool_path_reaches_the_pool_judge(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from sag2_retrievers.errors import JudgeConfigurationError
    from sag2_retrievers.judges.offline.pool import PoolJudge

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        monkeypatch.setattr("sag2_retrievers.judges.pool.MODEL_FILE", "data/missing.json")
    with pytest.raises(JudgeConfigurationError, match=r"missing\.json"):
        PoolJudge()


@pytest.mark.parametrize("old", ["sag2_retrievers.text", "sag2_retrievers.paper_diversity"])
def test_old_analyzer_paths_warn_and_keep_their_names(old: str) -> None:
    sys.modules.pop(old, None)
    with pytest.warns(DeprecationWarning, match="sag2_retrievers.analysis"):
        module = importlib.import_module(old)
    assert callable(getattr(module, "tokenize", None) or module.word_vectors)
