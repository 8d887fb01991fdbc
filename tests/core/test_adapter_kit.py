"""The adapter kit: ingest rules both adapters share, markdown headings, opening files."""

from __future__ import annotations

import sqlite3
import uuid
import warnings
from collections.abc import Sequence
from pathlib import Path

import pytest

from sag2_retrievers import (
    Candidate,
    Document,
    IndexUnavailableError,
    InvalidInputError,
    SAG2Config,
    SAG2Engine,
    SQLiteIndex,
)
from sag2_retrievers.adapter_kit import (
    SourceRecord,
    content_id,
    document_title,
    is_random_id,
    located_path,
    plan_ingest,
    precompute_judge,
    stable_source_id,
    write_changed,
)
from sag2_retrievers.errors import IndexSettingsMismatchError
from sag2_retrievers.judges.fakes import OverlapJudge
from sag2_retrievers.markdown import find_headings, first_h1, unit_heading
from sag2_retrievers.settings import IndexSettings

MANUAL = """# Pump manual

Intro text about the pump.

## Installation

Bolt the pump to the floor.

```sh
# not a heading: a shell comment
```

### Wiring

Connect the red wire.

## Maintenance

Grease the bearings yearly.
"""


# -- markdown headings -----------------------------------------------------------------------


def test_headings_are_found_outside_code_fences_only() -> None:
    found = [(h.level, h.text) for h in find_headings(MANUAL)]
    assert found == [(1, "Pump manual"), (2, "Installation"), (3, "Wiring"), (2, "Maintenance")]


def test_a_unit_gets_the_path_in_force_at_its_start_then_headings_inside_it() -> None:
    headings = find_headings(MANUAL)
    wiring = MANUAL.index("Connect")
    assert unit_heading("", headings, wiring, wiring + 10) == "Pump manual > Installation > Wiring"
    maintenance = MANUAL.index("Grease")
    assert unit_heading("", headings, maintenance, len(MANUAL)) == "Pump manual > Maintenance"
    assert unit_heading("Guide", headings, 0, 30) == "Guide > Pump manual"


def test_first_h1_ignores_lower_levels_and_closing_hashes() -> None:
    assert first_h1("## Sub\n# Main title ##\ntext") == "Main title"
    assert first_h1("no heading here") == ""


def test_indexed_units_carry_markdown_headings_and_bm25_weights_them(tmp_path: Path) -> None:
    with SQLiteIndex(tmp_path / "i.db") as index:
        index.add_documents(
            [
                Document("manual", MANUAL, title="Manual"),
                # Mentions wiring once in its body, like the manual's wiring section does.
                Document("note", "A note that mentions wiring once, in passing.", title="Note"),
            ]
        )
        unit = next(iter(index.document_units(["manual"]).values()))
        assert unit.heading == "Pump manual > Installation > Wiring > Maintenance"
        # "wiring" is in the manual's heading field too (weight 2), so it ranks first.
        assert next(hit.doc_id for hit in index.search("wiring")) == "manual"


def test_document_heading_is_prefixed_to_each_unit(tmp_path: Path) -> None:
    with SQLiteIndex(tmp_path / "i.db") as index:
        index.add_documents([Document("n", "Plain words only.", heading="Guide > Setup")])
        assert [u.heading for u in index.document_units(["n"]).values()] == ["Guide > Setup"]


def test_a_file_built_before_headings_were_indexed_is_detected(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    SQLiteIndex(path).close()
    with sqlite3.connect(path) as connection:
        connection.execute("DELETE FROM meta WHERE key = 'heading_rule'")
    with pytest.raises(IndexSettingsMismatchError, match="heading_rule"):
        SQLiteIndex(path)


# -- opening a file that must exist --------------------------------------------------------


def test_create_false_refuses_a_missing_file_and_creates_nothing(tmp_path: Path) -> None:
    path = tmp_path / "typo.db"
    with pytest.raises(IndexUnavailableError, match=r"no index file at .*typo\.db"):
        SQLiteIndex(path, create=False)
    assert list(tmp_path.iterdir()) == []


def test_create_false_refuses_a_file_that_holds_no_index(tmp_path: Path) -> None:
    path = tmp_path / "empty.db"
    path.touch()
    with pytest.raises(IndexUnavailableError, match="holds no SAG2 index"):
        SQLiteIndex(path, create=False)
    with sqlite3.connect(path) as connection:
        assert connection.execute("SELECT count(*) FROM sqlite_master").fetchone()[0] == 0


def test_create_false_opens_an_existing_index(tmp_path: Path) -> None:
    path = tmp_path / "i.db"
    with SQLiteIndex(path) as index:
        index.add_documents([Document("a", "Alpha text.")])
    with SQLiteIndex(path, create=False) as index:
        assert index.document_count() == 1


def test_a_missing_folder_is_named_in_the_error(tmp_path: Path) -> None:
    with pytest.raises(IndexUnavailableError, match=r"folder .*missing.* does not exist"):
        SQLiteIndex(tmp_path / "missing" / "i.db")


# -- ids, empties, repeats -------------------------------------------------------------------


def test_records_without_ids_get_their_path_numbered_when_a_file_gave_several() -> None:
    records = [
        SourceRecord(None, "one", {"file_path": "/d/a.txt"}),
        SourceRecord(None, "page 1", {"file_path": "/d/b.pdf"}),
        SourceRecord(None, "page 2", {"file_path": "/d/b.pdf"}),
        SourceRecord(None, "web", {"source": "https://x.org/p"}),
        SourceRecord("mine", "kept", {"file_path": "/d/c.txt"}),
        SourceRecord(None, "no path", {"k": 1}),
    ]
    assert plan_ingest(records) == [
        (0, "/d/a.txt"),
        (1, "/d/b.pdf_part_0"),
        (2, "/d/b.pdf_part_1"),
        (3, "https://x.org/p"),
        (4, "mine"),
        (5, content_id("no path", {"k": 1})),
    ]


def test_a_page_keeps_its_id_whichever_call_brings_it() -> None:
    """Pages placed by their metadata get path#place ids: planned one call at a time they
    still differ (a later call must not overwrite an earlier page), and chunks sharing a
    page are numbered within it."""
    pages = [SourceRecord(None, f"page {n}", {"source": "r.pdf", "page": n}) for n in range(2)]
    one_by_one = [plan_ingest([page])[0][1] for page in pages]
    assert one_by_one == ["r.pdf#page=0", "r.pdf#page=1"]
    assert [doc_id for _, doc_id in plan_ingest(pages)] == one_by_one
    chunks = [
        SourceRecord(None, f"chunk {n}", {"file_path": "/d/r.pdf", "page_label": "iv"})
        for n in range(2)
    ]
    assert [doc_id for _, doc_id in plan_ingest(chunks)] == [
        "/d/r.pdf#page_label=iv_part_0",
        "/d/r.pdf#page_label=iv_part_1",
    ]
    placed = {"source": "r.csv", "row": 3, "start_index": 40, "page": True, "seq_num": " "}
    assert located_path(placed) == "r.csv#row=3,start_index=40"


def test_the_same_batch_planned_twice_gets_the_same_ids() -> None:
    records = [SourceRecord(None, f"text {n}", {"n": n}) for n in range(3)]
    assert plan_ingest(records) == plan_ingest(list(records))


def test_blank_records_are_skipped_with_one_warning_naming_them() -> None:
    records = [
        SourceRecord(None, "  \n", {"file_path": "/d/empty.md"}),
        SourceRecord(None, "real text", {"file_path": "/d/full.md"}),
        SourceRecord(None, "", {"title": "Untitled draft"}),
    ]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        planned = plan_ingest(records)
    assert planned == [(1, "/d/full.md")]
    assert len(caught) == 1
    assert "'/d/empty.md'" in str(caught[0].message)
    assert "'Untitled draft'" in str(caught[0].message)


def test_blank_records_are_refused_when_skipping_is_off() -> None:
    with pytest.raises(InvalidInputError, match=r"no text: 'e\.txt'"):
        plan_ingest([SourceRecord(None, " ", {"file_name": "e.txt"})], skip_empty=False)


def test_exact_repeats_are_kept_once_and_different_content_is_not_a_repeat() -> None:
    same = SourceRecord(None, "text", {"a": 1})
    planned = plan_ingest([same, same, SourceRecord(None, "text", {"a": 2})])
    assert [position for position, _ in planned] == [0, 2]


def test_random_uuid4_ids_are_recognised() -> None:
    assert is_random_id(str(uuid.uuid4()))
    assert not is_random_id("docs/readme.md")
    assert not is_random_id(str(uuid.uuid5(uuid.NAMESPACE_URL, "x")))


# -- titles -------------------------------------------------------------------------------


def test_title_order_is_metadata_then_markdown_h1_then_file_name() -> None:
    assert document_title("# Heading", {"title": "Given", "file_name": "a.md"}, "title") == "Given"
    assert document_title("# Heading\nbody", {"file_name": "a.md"}, "title") == "Heading"
    assert document_title("body", {"file_name": "pump_manual.md"}, "title") == "pump manual"
    assert document_title("# Heading", {}, "title") == "Heading"
    assert document_title("body", {}, None) == ""


def test_a_hash_comment_in_a_non_markdown_file_is_not_its_title() -> None:
    text = "# comment\nprint('x')"
    assert document_title(text, {"file_path": "/src/tool.py"}, "title") == "tool"


# -- judge precompute ----------------------------------------------------------------------


def test_a_judge_without_passage_work_prepares_nothing() -> None:
    assert OverlapJudge().precompute([Candidate("t", "x")], progress=True) == 0


def test_precompute_judge_hands_every_unit_of_the_documents_to_the_judge(tmp_path: Path) -> None:
    seen: list[Candidate] = []

    class Recording(OverlapJudge):
        def precompute(self, candidates: Sequence[Candidate], *, progress: bool = False) -> int:
            seen.extend(candidates)
            return len(candidates)

    long_text = " ".join(f"Sentence {n} about the long river." for n in range(200))
    with SQLiteIndex(tmp_path / "i.db") as index:
        index.add_documents([Document("long", long_text, "Long"), Document("other", "Other.")])
        judge = Recording()
        prepared = precompute_judge(index, judge, ["long"])
        units = index.document_units(["long"])
    assert prepared == len(units) > 1
    assert [c.text for c in seen] == [u.body for _, u in sorted(units.items())]
    assert {c.title for c in seen} == {"Long"}


# -- units per document ---------------------------------------------------------------------


def manual_chapters() -> str:
    """A long manual whose every chapter mentions the pump, so many of its units match."""
    return "\n\n".join(
        f"Chapter {n} explains how the pump valve number {n} is serviced. " * 12 for n in range(12)
    )


def test_one_unit_per_source_document_by_default_more_when_asked(tmp_path: Path) -> None:
    with SQLiteIndex(tmp_path / "i.db") as index:
        index.add_documents(
            [Document("manual", manual_chapters(), "Manual"), Document("memo", "A pump memo.")]
        )
        assert index.unit_count() > 4
        question = "How is the pump valve serviced?"
        engines = [
            SAG2Engine(index, OverlapJudge()),
            SAG2Engine(index, OverlapJudge(), SAG2Config(units_per_document=3)),
        ]
        try:
            default, several = (engine.retrieve(question, 3).hits for engine in engines)
        finally:
            for engine in engines:
                engine.close()
    assert sorted(hit.doc_id for hit in default) == ["manual", "memo"]
    assert [hit.doc_id for hit in several].count("manual") == 3
    assert len({(hit.char_start, hit.char_end) for hit in several}) == 3


def test_units_per_document_must_be_positive() -> None:
    with pytest.raises(InvalidInputError, match="units_per_document"):
        SAG2Config(units_per_document=0)


def test_a_random_source_id_becomes_its_file_path_else_its_content_hash() -> None:
    random_id = str(uuid.uuid4())
    assert stable_source_id("memo", {"file_path": "/d/a.md"}, "h") == "memo"
    assert stable_source_id(random_id, {"file_path": "/d/a.md"}, "h") == "/d/a.md"
    page = {"file_path": "/d/a.pdf", "page_label": "2"}
    assert stable_source_id(random_id, page, "h") == "/d/a.pdf#page_label=2"
    assert stable_source_id(random_id, {}, "h") == stable_source_id(str(uuid.uuid4()), {}, "h")
    assert stable_source_id(random_id, {}, None) == random_id


def test_write_changed_skips_documents_stored_unchanged_even_if_read_again_later(
    tmp_path: Path,
) -> None:
    """A reader's last-access date changes on every read; it alone does not make a rewrite."""
    monday = {"file_path": "/d/a.md", "last_accessed_date": "2026-12-07"}
    tuesday = {**monday, "last_accessed_date": "2026-12-08"}
    with SQLiteIndex(tmp_path / "i.sqlite") as index:
        first = write_changed(index, [Document("a", "Alpha text.", "A", monday)])
        again = write_changed(index, [Document("a", "Alpha text.", "A", tuesday)])
        edited = write_changed(index, [Document("a", "Alpha text, edited.", "A", tuesday)])
    assert [d.id for d in first] == ["a"] and again == [] and [d.id for d in edited] == ["a"]


def test_a_document_with_a_heading_path_is_rewritten_only_when_its_headings_change(
    tmp_path: Path,
) -> None:
    """Splitters' sections carry a heading path the stored document does not keep: the
    stored units' headings tell whether it changed."""
    text = "Run pip install.\n\n## Details\n\nThen call retrieve."
    with SQLiteIndex(tmp_path / "i.sqlite", IndexSettings(chunk_chars=20)) as index:
        first = write_changed(index, [Document("s", text, "Guide", heading="Guide > Setup")])
        again = write_changed(index, [Document("s", text, "Guide", heading="Guide > Setup")])
        moved = write_changed(index, [Document("s", text, "Guide", heading="Guide > Install")])
    assert [d.id for d in first] == ["s"] and again == [] and [d.id for d in moved] == ["s"]
