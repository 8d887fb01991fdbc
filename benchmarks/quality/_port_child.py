"""Runs the authors' port (zleap-sag2) on one shared set, for benchmarks/quality/port_agreement.py.

Started with the port virtualenv's Python: ``python _port_child.py IN.json OUT.json``. IN
holds the passages (key, title, text) in index order and the questions; OUT gets, per
question, what port_agreement.py compares step by step. The scoring client below implements
the port's protocol (``await score(query, candidates, evidence) -> (scored, usage)``) with
the shared deterministic judge, so both engines see the same score for the same candidate.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

from _overlap_crc_judge import overlap_crc_score
from zleap.sag2._algorithm import search_sag2, tokenize
from zleap.sag2.lexical import LexicalSnapshot, fts_tokens, index_tokens

SEEDS_PER_ROUND = 10


class OverlapCrcClient:
    """The port's scoring-client protocol answered by the shared judge (context ignored)."""

    async def score(
        self, query: str, candidates: list[dict[str, Any]], evidence: list[dict[str, Any]]
    ) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        """Every candidate with its ``jev_score``, and the usage record the port expects."""
        scored = [
            {**c, "jev_score": overlap_crc_score(query, c["title"], c["content"])}
            for c in candidates
        ]
        usage = {
            "requests": 1,
            "judgments": len(candidates),
            "input_tokens": None,
            "output_tokens": None,
            "batches": [{"candidate_count": len(candidates)}],
        }
        return scored, usage


def snapshot(passages: list[dict[str, str]]) -> LexicalSnapshot:
    """The port's search snapshot of the passages, one unit each, tokenised by the port."""
    rows = [
        {
            "key": p["key"],
            "title": p["title"],
            "heading": "",
            "content": p["text"],
            "document_body": p["text"],
            "tokens": [index_tokens(p["title"]), index_tokens(""), index_tokens(p["text"])],
        }
        for p in passages
    ]
    return LexicalSnapshot(rows)


def question_record(index: LexicalSnapshot, query: str, raw: dict[str, Any]) -> dict[str, Any]:
    """What one question did, as unit keys: terms, BM25 list, seeds, terms and pools per
    round, the top 10 before and after the diversity step, and judgments."""
    key = {row_id: row["key"] for row_id, row in index.rows.items()}
    expansions = [step for step in raw["trace"] if step["stage"] == "expansion"]
    judged = [step for step in raw["trace"] if step["stage"] == "jev"]
    seeds, expanded = [], set()
    for step in judged:
        ranked = [entry["id"] for entry in step["scores"]]
        frontier = [i for i in ranked if i not in expanded][:SEEDS_PER_ROUND]
        expanded.update(frontier)
        seeds.append([key[i] for i in frontier])
    rounds = [{"seeds": [], "terms": [], "pool": _sorted_keys(judged[0], key)}] if judged else []
    for step, seed_keys, judged_step in zip(expansions, seeds, judged[1:], strict=False):
        rounds.append(
            {"seeds": seed_keys, "terms": step["terms"], "pool": _sorted_keys(judged_step, key)}
        )
    return {
        "tokens": list(dict.fromkeys(tokenize(query)))[:80],
        # As the index matches them: each quoted word's unicode61 terms.
        "terms": [
            p for t in index._terms(index.match_query(query)) if (p := " ".join(fts_tokens(t)))
        ],
        "bm25": [key[i] for i in raw["trace"][0]["candidate_ids"]] if raw["trace"] else [],
        "rounds": rounds,
        "before_diversity": [key[e["id"]] for e in judged[-1]["scores"][:10]] if judged else [],
        "top10": [c["key"] for c in raw["candidates"][:10]],
        "judgments": raw["jev_usage"]["judgments"],
    }


def _sorted_keys(step: dict[str, Any], key: dict[int, str]) -> list[str]:
    """The unit keys a scoring round judged, sorted (pool order is not compared)."""
    return sorted(key[entry["id"]] for entry in step["scores"])


async def run(payload: dict[str, Any]) -> list[dict[str, Any]]:
    """Every question of the set through the port's search, in order."""
    index = snapshot(payload["passages"])
    client = OverlapCrcClient()
    records = []
    for question in payload["questions"]:
        view = index.query_view()
        raw = await search_sag2(view, client, question["question"])
        records.append({"id": question["id"], **question_record(view, question["question"], raw)})
    return records


def main() -> int:
    """Read the set, run it, write the records."""
    source, target = sys.argv[1:3]
    with open(source, encoding="utf-8") as handle:
        payload = json.load(handle)
    records = asyncio.run(run(payload))
    with open(target, "w", encoding="utf-8") as handle:
        json.dump(records, handle, ensure_ascii=False)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
