"""The two analyzer profiles side by side: "sag2" (the project's rules) and "paper" (issue 13).

Per shared set (KAG subset, pooled corpus; MuSiQue train fixture) and profile: BM25 R@5/R@10
and SAG2 R@5/R@10/AE@10 under each judge (the deterministic overlap judge, and the offline
local judge with ``--judges fake local``), then the two profiles' top-10 agreement (mean
share of the top-10 set in common, and the share of questions with the same top-10 order).
A small Vietnamese / Korean / Chinese example set shows where the profiles differ outside
English: the rank of each query's gold document and how many documents match at all.

Run from the repository root:
``python benchmarks/quality/analyzer_profiles.py [--judges fake local]``.
Indexes are kept under ``runs/analyzer_profiles/``.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections.abc import Sequence
from datetime import date
from pathlib import Path

import _here  # noqa: F401 - puts benchmarks/ on the import path
from _common import KAG_QUESTIONS, TRAIN_CORPUS, TRAIN_QUESTIONS, git_revision, machine

from sag2_retrievers import Document, IndexSettings, SQLiteIndex
from sag2_retrievers.analysis import PROFILES, Profile
from sag2_retrievers.eval import EvalQuestion, Passage, load_corpus, load_questions, pool_corpus
from sag2_retrievers.eval.datasets import unique_passages
from sag2_retrievers.eval.runner import EvalOptions, EvalRun, compare_reports, evaluate
from sag2_retrievers.judges.base import Candidate, Judge
from sag2_retrievers.judges.factory import make_judge

RUNS = Path("runs") / "analyzer_profiles"
DELTAS = ("R@10", "AE@10")

# (language, gold document id, query): each query asks for its gold document's subject.
EXAMPLE_DOCUMENTS = [
    ("vi-chauduc", "Châu Đức", "Châu Đức là một huyện của tỉnh Bà Rịa – Vũng Tàu."),
    ("vi-hue", "Huế", "Huế là cố đô của Việt Nam, nằm bên bờ sông Hương."),
    ("vi-hanoi", "Hà Nội", "Hà Nội là thủ đô của Việt Nam, có Hồ Hoàn Kiếm."),
    ("vi-dalat", "Đà Lạt", "Đà Lạt là thành phố cao nguyên, nổi tiếng với hoa và cà phê."),
    ("vi-mekong", "Đồng bằng sông Cửu Long", "Đồng bằng sông Cửu Long trồng nhiều lúa gạo."),
    ("ko-seoul", "서울", "서울은 대한민국의 수도이다. 한강이 도시를 가로지른다."),
    ("ko-busan", "부산", "부산은 항구 도시이며 해운대 해수욕장이 유명하다."),
    ("ko-jeju", "제주도", "제주도는 화산섬이며 한라산이 있다."),
    ("ko-gyeongju", "경주", "경주는 신라의 수도였으며 불국사가 있다."),
    ("ko-kimchi", "김치", "김치는 배추와 고춧가루로 만드는 발효 음식이다."),
    ("zh-beijing", "北京", "北京是中华人民共和国的首都，有故宫和长城。"),
    ("zh-shanghai", "上海", "上海是中国最大的港口城市，位于长江入海口。"),
    ("zh-xian", "西安", "西安古称长安，是十三朝古都，有兵马俑。"),
    ("zh-tea", "龙井茶", "龙井茶是产于杭州西湖的绿茶。"),
]
EXAMPLE_QUERIES = [
    ("vi", "vi-chauduc", "huyện Châu Đức thuộc tỉnh nào"),
    ("vi", "vi-hue", "cố đô Huế bên sông nào"),
    ("vi", "vi-hanoi", "thủ đô Hà Nội"),
    ("vi", "vi-dalat", "thành phố Đà Lạt nổi tiếng với gì"),
    ("vi", "vi-mekong", "lúa gạo ở sông Cửu Long"),
    ("ko", "ko-seoul", "대한민국 수도"),
    ("ko", "ko-busan", "항구 도시 부산"),
    ("ko", "ko-jeju", "한라산 화산섬"),
    ("ko", "ko-gyeongju", "신라 불국사"),
    ("ko", "ko-kimchi", "배추 발효 음식"),
    ("zh", "zh-beijing", "中国的首都是哪里"),
    ("zh", "zh-shanghai", "长江入海口的港口城市"),
    ("zh", "zh-xian", "兵马俑在哪个城市"),
    ("zh", "zh-tea", "西湖绿茶"),
]


def build(path: Path, passages: Sequence[Passage], profile: Profile) -> SQLiteIndex:
    """The set's index under one profile, built once and reused."""
    fresh = not path.exists()
    index = SQLiteIndex(path, IndexSettings(analyzer_profile=profile))
    if fresh:
        index.add_documents(Document(p.doc_id, p.text, p.title) for p in passages)
    return index


def judge_named(name: str, passages: Sequence[Passage]) -> Judge:
    """The named judge; the local one with its passage embeddings computed once, cached."""
    judge = make_judge(name)
    judge.precompute([Candidate(p.title, p.text) for p in passages])
    return judge


def metrics(run: EvalRun) -> dict[str, float]:
    """R@5, R@10 and AE@10 (percent) of a run."""
    summary = run.summary()
    return {
        "R@5": summary["recall_at"]["5"],
        "R@10": summary["recall_at"]["10"],
        "AE@10": summary["ae_at"]["10"],
    }


def agreement(first: EvalRun, second: EvalRun) -> tuple[float, float]:
    """Mean share of top-10 sources in common, and the share of questions with the same top-10
    order, between two runs of the same questions."""
    overlaps, same = [], 0
    for a, b in zip(first.runs, second.runs, strict=True):
        top_a = [s.identity for s in a.sources[:10]]
        top_b = [s.identity for s in b.sources[:10]]
        overlaps.append(len(set(top_a) & set(top_b)) / max(1, len(top_a), len(top_b)))
        same += top_a == top_b
    return 100 * sum(overlaps) / len(overlaps), 100 * same / len(overlaps)


async def run_set(
    slug: str,
    title: str,
    passages: Sequence[Passage],
    questions: Sequence[EvalQuestion],
    judges: list[str],
) -> list[str]:
    """The markdown rows of one set: per method and profile, then the agreements."""
    runs: dict[tuple[str, str], EvalRun] = {}
    for profile in PROFILES:
        with build(RUNS / f"{slug}-{profile}.sqlite", passages, profile) as index:
            options = EvalOptions("bm25")
            runs[("BM25", profile)] = await evaluate(index, questions, None, options)
            for judge_name in judges:
                judge = judge_named(judge_name, passages)
                started = time.perf_counter()
                runs[(f"SAG2, judge {judge_name}", profile)] = await evaluate(
                    index, questions, judge, EvalOptions("sag2", concurrency=2)
                )
                print(f"{slug} {profile} {judge_name}: {time.perf_counter() - started:.1f} s")
                await judge.aclose()
    rows = [
        f"### {title} ({len(questions)} questions, {len(passages):,} passages)",
        "",
        "| method | profile | R@5 | R@10 | AE@10 | top-10 set agreement | same top-10 order "
        "| ΔR@10 paper - sag2 [95% CI] | ΔAE@10 [95% CI] |",
        "|---|---|---:|---:|---:|---:|---:|---|---|",
    ]
    for method in dict.fromkeys(key[0] for key in runs):
        ours, paper = runs[(method, "sag2")], runs[(method, "paper")]
        overlap, same = agreement(ours, paper)
        _, deltas = compare_reports(ours.to_json(None, 0), paper.to_json(None, 0), DELTAS)
        compared = " | ".join(f"{d.difference:+.2f} [{d.low:+.2f}, {d.high:+.2f}]" for d in deltas)
        for profile in PROFILES:
            values = metrics(runs[(method, profile)])
            shared = f"{overlap:.1f}% | {same:.0f}% | {compared}" if profile == "paper" else "| | |"
            rows.append(
                f"| {method} | {profile} | {values['R@5']:.2f} | {values['R@10']:.2f} | "
                f"{values['AE@10']:.2f} | {shared} |"
            )
    return [*rows, ""]


def example_rows() -> list[str]:
    """Per language and profile: gold found at rank 1, within 3, and documents matched."""
    documents = [Document(doc_id, text, title) for doc_id, title, text in EXAMPLE_DOCUMENTS]
    rows = [
        "### Vietnamese / Korean / Chinese examples "
        f"({len(EXAMPLE_DOCUMENTS)} documents, {len(EXAMPLE_QUERIES)} queries, BM25)",
        "",
        "| language | profile | gold at rank 1 | gold in top 3 | documents matched per query |",
        "|---|---|---:|---:|---:|",
    ]
    for language in ("vi", "ko", "zh"):
        queries = [(gold, text) for lang, gold, text in EXAMPLE_QUERIES if lang == language]
        for profile in PROFILES:
            path = RUNS / f"examples-{profile}.sqlite"
            path.unlink(missing_ok=True)
            with SQLiteIndex(path, IndexSettings(analyzer_profile=profile)) as index:
                index.add_documents(documents, parallel=False)
                found = [[h.doc_id for h in index.search(q, 100)] for _, q in queries]
            first = sum(ids[:1] == [gold] for ids, (gold, _) in zip(found, queries, strict=True))
            top3 = sum(gold in ids[:3] for ids, (gold, _) in zip(found, queries, strict=True))
            matched = sum(len(ids) for ids in found) / len(found)
            rows.append(
                f"| {language} | {profile} | {first}/{len(queries)} | {top3}/{len(queries)} | "
                f"{matched:.1f} |"
            )
    return [*rows, ""]


def main(argv: list[str] | None = None) -> int:
    """Run both sets and the examples; print the markdown for docs/benchmarks.md."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--judges", nargs="+", default=["fake"], choices=["fake", "local"])
    args = parser.parse_args(argv)
    RUNS.mkdir(parents=True, exist_ok=True)
    kag = load_questions(KAG_QUESTIONS)
    train = load_questions(TRAIN_QUESTIONS)
    sets = [
        ("kag", "MuSiQue KAG subset", unique_passages(pool_corpus(kag)), kag),
        ("train", "MuSiQue train fixture", unique_passages(load_corpus(TRAIN_CORPUS)), train),
    ]
    lines = [
        "Command: `python benchmarks/quality/analyzer_profiles.py "
        f"--judges {' '.join(args.judges)}`; "
        f"{date.today().isoformat()}, revision {git_revision()}, {machine()}.",
        "",
    ]
    for slug, title, passages, questions in sets:
        lines += asyncio.run(run_set(slug, title, passages, questions, args.judges))
    lines += example_rows()
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
