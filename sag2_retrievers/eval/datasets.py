"""Load multi-hop QA question sets and corpora in the HippoRAG evaluation formats."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sag2_retrievers.errors import InvalidInputError
from sag2_retrievers.input_files import parse_json, read_json, text_lines

_HOPS_PREFIX = re.compile(r"(\d+)hop\d*__")


@dataclass(frozen=True)
class Passage:
    """A titled passage; title and text together identify it, since titles repeat."""

    title: str
    text: str

    @property
    def identity(self) -> str:
        """The evaluation identity string: title, a newline, then text."""
        return f"{self.title}\n{self.text}"

    @property
    def doc_id(self) -> str:
        """A stable 16-hex-digit id derived from the identity, used to key the index."""
        return hashlib.sha256(self.identity.encode("utf-8")).hexdigest()[:16]


@dataclass(frozen=True)
class EvalQuestion:
    """One evaluation question with its gold identities and its own paragraphs."""

    id: str
    question: str
    gold: tuple[str, ...]
    hops: int | None
    paragraphs: tuple[Passage, ...]


def hops_from_id(question_id: str) -> int | None:
    """Return the hop count encoded in a MuSiQue id prefix (`3hop1__...` -> 3), else None."""
    match = _HOPS_PREFIX.match(question_id)
    return int(match.group(1)) if match else None


def load_questions(path: str | Path) -> list[EvalQuestion]:
    """Read MuSiQue-, HippoRAG- or HotpotQA-shaped questions: a JSON list, or ``.jsonl`` lines."""
    records = _read_jsonl(path) if str(path).endswith(".jsonl") else _read_json(path)
    if not isinstance(records, list):
        raise InvalidInputError(
            f"{path}: expected a JSON list of question records, got {type(records).__name__}"
        )
    return [_parse_question(record, path, index) for index, record in enumerate(records)]


def load_corpus(path: str | Path) -> list[Passage]:
    """Read a corpus given as a list of `{title, text}` or a dict `title -> [sentences]`."""
    payload = _read_json(path)
    if isinstance(payload, list):
        passages = [_passage_from_record(entry, path, index) for index, entry in enumerate(payload)]
    elif isinstance(payload, dict):
        passages = [
            _passage_from_sentences(title, sentences, path) for title, sentences in payload.items()
        ]
    else:
        raise InvalidInputError(
            f"{path}: expected a JSON list of {{title, text}} or a dict title -> [sentences], "
            f"got {type(payload).__name__}"
        )
    return unique_passages(passages)


def pool_corpus(questions: Iterable[EvalQuestion]) -> list[Passage]:
    """Pool every question's paragraphs (supporting and distractor) into one corpus."""
    return unique_passages(passage for question in questions for passage in question.paragraphs)


def unique_passages(passages: Iterable[Passage]) -> list[Passage]:
    """De-duplicate passages by identity, keeping the first occurrence and its position."""
    first_by_identity: dict[str, Passage] = {}
    for passage in passages:
        first_by_identity.setdefault(passage.identity, passage)
    return list(first_by_identity.values())


def _read_json(path: str | Path) -> Any:
    """Parse a JSON file (size-checked, UTF-8), every failure an InvalidInputError."""
    return read_json(Path(path))


def _read_jsonl(path: str | Path) -> list[Any]:
    """Parse a file of one JSON value per line (blank lines skipped), naming a bad line."""
    return [
        parse_json(line, f"{path}: line {number}", "one JSON value per line")
        for number, line in text_lines(Path(path))
        if line.strip()
    ]


def _parse_question(record: Any, path: str | Path, index: int) -> EvalQuestion:
    """Dispatch one record to the MuSiQue or HotpotQA parser by its keys."""
    where = f"{path}: record {index}"
    if isinstance(record, Mapping) and isinstance(record.get("paragraphs"), list):
        return _parse_musique(record, where)
    if isinstance(record, Mapping) and "context" in record and "supporting_facts" in record:
        return _parse_hotpotqa(record, where)
    raise InvalidInputError(
        f"{where}: unknown question shape; expected MuSiQue/HippoRAG keys "
        "(id, question, paragraphs) or HotpotQA keys (_id, question, context, supporting_facts)"
    )


def _parse_musique(record: Mapping[str, Any], where: str) -> EvalQuestion:
    """Build a question from MuSiQue paragraphs (`paragraph_text` or `text`, `is_supporting`)."""
    question_id = _question_id(record, where)
    paragraphs: list[Passage] = []
    gold: list[str] = []
    for position, paragraph in enumerate(record["paragraphs"]):
        passage, supporting = _musique_paragraph(paragraph, f"{where}, paragraph {position}")
        paragraphs.append(passage)
        if supporting:
            gold.append(passage.identity)
    return EvalQuestion(
        id=question_id,
        question=_question_text(record, where),
        gold=tuple(dict.fromkeys(gold)),
        hops=hops_from_id(question_id),
        paragraphs=tuple(unique_passages(paragraphs)),
    )


def _musique_paragraph(paragraph: Any, where: str) -> tuple[Passage, bool]:
    """Read one MuSiQue paragraph as a passage and its supporting flag."""
    if not isinstance(paragraph, Mapping):
        raise InvalidInputError(f"{where}: expected an object, got {type(paragraph).__name__}")
    text = paragraph.get("paragraph_text", paragraph.get("text"))
    title = paragraph.get("title")
    supporting = paragraph.get("is_supporting")
    if not isinstance(title, str) or not isinstance(text, str):
        raise InvalidInputError(
            f"{where}: needs a string `title` and a string `paragraph_text` or `text`"
        )
    if not isinstance(supporting, bool):
        raise InvalidInputError(f"{where}: needs a boolean `is_supporting`")
    return Passage(title=title, text=text), supporting


def _parse_hotpotqa(record: Mapping[str, Any], where: str) -> EvalQuestion:
    """Build a question from HotpotQA context entries and supporting-fact titles."""
    paragraphs = _hotpotqa_context(record["context"], where)
    supporting_titles = _supporting_titles(record["supporting_facts"], where)
    gold = [passage.identity for passage in paragraphs if passage.title in supporting_titles]
    return EvalQuestion(
        id=_question_id(record, where),
        question=_question_text(record, where),
        gold=tuple(dict.fromkeys(gold)),
        hops=None,
        paragraphs=tuple(unique_passages(paragraphs)),
    )


def _hotpotqa_context(context: Any, where: str) -> list[Passage]:
    """Read HotpotQA `context` = [[title, [sentences]], ...] as passages."""
    if not isinstance(context, list):
        raise InvalidInputError(f"{where}: `context` must be a list of [title, [sentences]]")
    passages = []
    for position, entry in enumerate(context):
        if not isinstance(entry, Sequence) or isinstance(entry, str) or len(entry) != 2:
            raise InvalidInputError(
                f"{where}, context entry {position}: expected [title, [sentences]]"
            )
        passages.append(_passage_from_sentences(entry[0], entry[1], f"{where}, context"))
    return passages


def _supporting_titles(supporting_facts: Any, where: str) -> set[str]:
    """Collect the titles named by HotpotQA `supporting_facts` = [[title, sent_idx], ...]."""
    if not isinstance(supporting_facts, list):
        raise InvalidInputError(f"{where}: `supporting_facts` must be a list of [title, sent_idx]")
    titles = set()
    for position, fact in enumerate(supporting_facts):
        if not isinstance(fact, Sequence) or isinstance(fact, str) or not fact:
            raise InvalidInputError(
                f"{where}, supporting fact {position}: expected [title, sent_idx]"
            )
        if not isinstance(fact[0], str):
            raise InvalidInputError(f"{where}, supporting fact {position}: title must be a string")
        titles.add(fact[0])
    return titles


def _question_id(record: Mapping[str, Any], where: str) -> str:
    """Return the record's `_id` or `id` as a string."""
    question_id = record.get("_id", record.get("id"))
    if isinstance(question_id, bool) or not isinstance(question_id, (str, int)):
        raise InvalidInputError(f"{where}: needs a string `id` or `_id`")
    return str(question_id)


def _question_text(record: Mapping[str, Any], where: str) -> str:
    """Return the record's `question` string."""
    question = record.get("question")
    if not isinstance(question, str):
        raise InvalidInputError(f"{where}: needs a string `question`")
    return question


def _passage_from_record(entry: Any, path: str | Path, index: int) -> Passage:
    """Read one `{title, text}` corpus entry."""
    if not isinstance(entry, Mapping):
        raise InvalidInputError(f"{path}: entry {index}: expected an object with title and text")
    title, text = entry.get("title"), entry.get("text")
    if not isinstance(title, str) or not isinstance(text, str):
        raise InvalidInputError(f"{path}: entry {index}: needs string `title` and `text`")
    return Passage(title=title, text=text)


def _passage_from_sentences(title: Any, sentences: Any, where: str | Path) -> Passage:
    """Join a HotpotQA sentence list into one passage text, as HippoRAG does."""
    if not isinstance(title, str):
        raise InvalidInputError(f"{where}: title {title!r} must be a string")
    if not isinstance(sentences, list) or not all(isinstance(item, str) for item in sentences):
        raise InvalidInputError(f"{where}: sentences of {title!r} must be a list of strings")
    return Passage(title=title, text="".join(sentences))
