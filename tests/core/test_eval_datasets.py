"""Question and corpus loaders on small hand-written files and on the shared benchmark data."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from sag2_retrievers.errors import InvalidInputError
from sag2_retrievers.eval import (
    EvalQuestion,
    Passage,
    hops_from_id,
    load_corpus,
    load_questions,
    pool_corpus,
)

DATA = Path("/work/shared/data")
KAG_MUSIQUE = DATA / "musique" / "kag_musique_qa_100_hipporag_subset.json"
MUSIQUE_TRAIN = DATA / "musique" / "hipporag_musique_train_fixture.json"
MUSIQUE_TRAIN_CORPUS = DATA / "musique" / "hipporag_musique_train_fixture_corpus.json"
HOTPOTQA = DATA / "hotpotqa" / "hipporag_hotpotqa_train_fixture.json"
HOTPOTQA_CORPUS = DATA / "hotpotqa" / "hipporag_hotpotqa_train_fixture_corpus.json"
HIPPORAG_SAMPLE = DATA / "hipporag_format_samples" / "sample.json"
HIPPORAG_SAMPLE_CORPUS = DATA / "hipporag_format_samples" / "sample_corpus.json"

needs_shared_data = pytest.mark.skipif(not DATA.is_dir(), reason="shared benchmark data absent")


def _write(tmp_path: Path, payload: Any, name: str = "data.json") -> Path:
    """Write a JSON payload to a temp file and return its path."""
    path = tmp_path / name
    path.write_text(json.dumps(payload), encoding="utf-8")
    return path


def _musique_record(question_id: str = "3hop1__1_2_3") -> dict[str, Any]:
    """A small MuSiQue record with a repeated title and a repeated supporting paragraph."""
    return {
        "id": question_id,
        "question": "Who founded the city?",
        "paragraphs": [
            {"idx": 0, "title": "Rome", "paragraph_text": "Rome is old.", "is_supporting": False},
            {"idx": 1, "title": "Rome", "paragraph_text": "Romulus.", "is_supporting": True},
            {"idx": 2, "title": "Remus", "paragraph_text": "A twin.", "is_supporting": True},
            {"idx": 3, "title": "Rome", "paragraph_text": "Romulus.", "is_supporting": True},
        ],
    }


def _hotpotqa_record() -> dict[str, Any]:
    """A small HotpotQA record: gold is chosen by title, text joins the sentences."""
    return {
        "_id": "5a77ec",
        "question": "Which river?",
        "supporting_facts": [["Tiber", 0], ["Rome", 1], ["Tiber", 1]],
        "context": [
            ["Rome", ["Rome is a city.", " It lies on a river."]],
            ["Paris", ["Paris is a city."]],
            ["Tiber", ["The Tiber flows.", " Through Rome."]],
        ],
    }


def test_doc_id_is_the_sha256_prefix_of_the_identity() -> None:
    passage = Passage(title="Zürich", text="A city.")
    assert passage.identity == "Zürich\nA city."
    expected = hashlib.sha256("Zürich\nA city.".encode()).hexdigest()[:16]
    assert passage.doc_id == expected == "4f216dd0bfb89909"


def test_doc_id_separates_same_title_different_text() -> None:
    assert Passage("Rome", "a").doc_id != Passage("Rome", "b").doc_id


@pytest.mark.parametrize(
    ("question_id", "hops"),
    [("2hop__1_2", 2), ("3hop1__1_2_3", 3), ("4hop2__1", 4), ("5a77ec", None), ("x2hop__1", None)],
)
def test_hops_come_from_the_musique_id_prefix(question_id: str, hops: int | None) -> None:
    assert hops_from_id(question_id) == hops


def test_musique_record_gives_deduplicated_gold_in_file_order(tmp_path: Path) -> None:
    [question] = load_questions(_write(tmp_path, [_musique_record()]))
    assert question == EvalQuestion(
        id="3hop1__1_2_3",
        question="Who founded the city?",
        gold=("Rome\nRomulus.", "Remus\nA twin."),
        hops=3,
        paragraphs=(
            Passage("Rome", "Rome is old."),
            Passage("Rome", "Romulus."),
            Passage("Remus", "A twin."),
        ),
    )


def test_hipporag_record_with_text_key_is_read_like_musique(tmp_path: Path) -> None:
    record = {
        "id": "sample/question_1.json",
        "question": "Who?",
        "paragraphs": [{"title": "T", "text": "Body.", "is_supporting": True, "idx": 0}],
    }
    [question] = load_questions(_write(tmp_path, [record]))
    assert question.gold == ("T\nBody.",)
    assert question.hops is None


def test_hotpotqa_record_gold_is_context_entries_named_in_supporting_facts(
    tmp_path: Path,
) -> None:
    [question] = load_questions(_write(tmp_path, [_hotpotqa_record()]))
    assert question.id == "5a77ec"
    assert question.hops is None
    assert question.gold == (
        "Rome\nRome is a city. It lies on a river.",
        "Tiber\nThe Tiber flows. Through Rome.",
    )
    assert [passage.title for passage in question.paragraphs] == ["Rome", "Paris", "Tiber"]


def test_hotpotqa_record_may_use_id_instead_of_underscore_id(tmp_path: Path) -> None:
    record = _hotpotqa_record()
    record["id"] = record.pop("_id")
    [question] = load_questions(_write(tmp_path, [record]))
    assert question.id == "5a77ec"


def test_unknown_record_shape_names_file_and_index(tmp_path: Path) -> None:
    path = _write(tmp_path, [_musique_record(), {"question": "No passages?"}])
    with pytest.raises(InvalidInputError, match=r"data\.json: record 1: unknown question shape"):
        load_questions(path)


def test_non_boolean_is_supporting_is_refused(tmp_path: Path) -> None:
    record = _musique_record()
    record["paragraphs"][2]["is_supporting"] = "False"
    with pytest.raises(InvalidInputError, match="record 0, paragraph 2: needs a boolean"):
        load_questions(_write(tmp_path, [record]))


def test_question_file_must_be_a_list(tmp_path: Path) -> None:
    with pytest.raises(InvalidInputError, match="expected a JSON list"):
        load_questions(_write(tmp_path, _musique_record()))


def test_invalid_json_is_reported_as_invalid_input(tmp_path: Path) -> None:
    path = tmp_path / "broken.json"
    path.write_text("[{", encoding="utf-8")
    with pytest.raises(InvalidInputError, match=r"broken\.json: not valid JSON"):
        load_questions(path)


def test_list_corpus_is_deduplicated_by_title_and_text(tmp_path: Path) -> None:
    entries = [
        {"title": "Rome", "text": "A", "idx": 0},
        {"title": "Rome", "text": "B", "idx": 1},
        {"title": "Rome", "text": "A", "idx": 2},
    ]
    assert load_corpus(_write(tmp_path, entries)) == [Passage("Rome", "A"), Passage("Rome", "B")]


def test_sentence_dict_corpus_joins_sentences(tmp_path: Path) -> None:
    corpus = load_corpus(_write(tmp_path, {"Rome": ["One.", " Two."], "Paris": []}))
    assert corpus == [Passage("Rome", "One. Two."), Passage("Paris", "")]


def test_corpus_entry_without_text_names_the_entry(tmp_path: Path) -> None:
    with pytest.raises(InvalidInputError, match="entry 1: needs string `title` and `text`"):
        load_corpus(_write(tmp_path, [{"title": "A", "text": "a"}, {"title": "B"}]))


def test_corpus_of_another_shape_is_refused(tmp_path: Path) -> None:
    with pytest.raises(InvalidInputError, match="expected a JSON list of"):
        load_corpus(_write(tmp_path, "just text"))


def test_pool_keeps_first_occurrence_across_questions(tmp_path: Path) -> None:
    other = _musique_record("2hop__9_9")
    other["paragraphs"] = [
        {"title": "Remus", "paragraph_text": "A twin.", "is_supporting": True},
        {"title": "Alba", "paragraph_text": "Longa.", "is_supporting": False},
    ]
    questions = load_questions(_write(tmp_path, [_musique_record(), other]))
    assert [passage.identity for passage in pool_corpus(questions)] == [
        "Rome\nRome is old.",
        "Rome\nRomulus.",
        "Remus\nA twin.",
        "Alba\nLonga.",
    ]


def _assert_gold_in(questions: list[EvalQuestion], corpus: list[Passage]) -> None:
    """Every gold identity of every question is a passage of the corpus."""
    identities = {passage.identity for passage in corpus}
    missing = [(q.id, gold) for q in questions for gold in q.gold if gold not in identities]
    assert missing == []
    assert all(question.gold for question in questions)


@needs_shared_data
def test_kag_musique_pools_to_1839_passages_holding_all_gold() -> None:
    questions = load_questions(KAG_MUSIQUE)
    corpus = pool_corpus(questions)
    assert len(questions) == 100
    assert len(corpus) == 1839
    _assert_gold_in(questions, corpus)
    assert {question.hops for question in questions} == {2, 3, 4}
    assert all(2 <= len(question.gold) <= 4 for question in questions)


@needs_shared_data
def test_musique_train_corpus_has_1890_passages_holding_all_gold() -> None:
    questions = load_questions(MUSIQUE_TRAIN)
    corpus = load_corpus(MUSIQUE_TRAIN_CORPUS)
    assert len(corpus) == 1890
    _assert_gold_in(questions, corpus)
    assert {passage.identity for passage in pool_corpus(questions)} == {
        passage.identity for passage in corpus
    }


@needs_shared_data
def test_musique_train_hop_counts_follow_the_id_prefixes() -> None:
    questions = load_questions(MUSIQUE_TRAIN)
    hops = [question.hops for question in questions]
    assert (hops.count(2), hops.count(3), hops.count(4)) == (68, 27, 5)


@needs_shared_data
def test_hotpotqa_corpus_has_994_passages_holding_all_gold() -> None:
    questions = load_questions(HOTPOTQA)
    corpus = load_corpus(HOTPOTQA_CORPUS)
    assert len(questions) == 100
    assert len(corpus) == 994
    _assert_gold_in(questions, corpus)
    assert all(len(question.gold) == 2 for question in questions)


@needs_shared_data
def test_hipporag_sample_loads_with_its_corpus() -> None:
    questions = load_questions(HIPPORAG_SAMPLE)
    corpus = load_corpus(HIPPORAG_SAMPLE_CORPUS)
    assert [question.id for question in questions] == ["sample/question_1.json"]
    assert len(corpus) == 3
    _assert_gold_in(questions, corpus)
