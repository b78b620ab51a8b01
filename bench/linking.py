"""The linking pipeline (issue 16) on HotpotQA, and the rules decomposer on StrategyQA.

HotpotQA: the 250 public dev questions minus the yes/no ones (as the paper
does), over the 4,858-paragraph pool (``bench/work/hotpot-pool``, built by
``python -m bench.hotpotqa --build-only``). For every retriever and ablation:

* Hotpot@5 / Hotpot@20: a passage among the top 5 / 20 contains an answer;
* both supporting paragraphs among the top 10 documents (documents in the
  order of their best passage in the top 100 passages, for every row alike);
* linking recall (linking rows): both supporting paragraphs are among the
  linked documents;
* per-step latency of the linking rows (mean ms per question, from the trace).

Rows: ``bm25``, ``dense``, ``hybrid``, ``dhr`` (build defaults); ``linking``
(cross-encoder ``--reranker``, trained cross-domain on SQuAD: see
bench/README.md); ablations: no decomposition (``decomposer=none``), no
event linking of the question (``event_titles=0``), no rerank (no
``reranker``: the coarse order), and ``dhr`` over the linked documents
(``doc_stage=linked``); and, without rerank, no sub-question slots, no
coverage step at all (``hop_slot=0 subquestion_slots=0``) and the paper's
plain BM25 order (also ``link_weight=0``). The paper's figures are printed
beside ours.

StrategyQA (``strategyqa_train.json``, gold decompositions): the share of
questions the rules decomposer splits into ≥ 2 sub-questions, and the
token F1 (SQuAD normalization, bag of tokens) of the sub-questions, joined,
against the gold decomposition joined; an unsplit question counts as the
question itself, which is also reported as the "no decomposition" baseline.

    python -m bench.linking [--reranker bench/work/reranker-hybrid] [--limit N] [--strategyqa-limit N]
"""

from __future__ import annotations

import argparse
import json
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from bench.common import PINNED, WORK, Report, data_dir
from bench.hotpotqa import ROOT, ensure_pool

PAPER = [  # Yu, Zhou & Roth, HotpotQA Hotpot@5 / Hotpot@20 (no in-domain supervision)
    {"retriever": "paper: DPR", "Hotpot@5": 32.1, "Hotpot@20": 44.9},
    {"retriever": "paper: FiD-KD", "Hotpot@5": 36.7, "Hotpot@20": 50.5},
    {"retriever": "paper: linking pipeline", "Hotpot@5": 55.1, "Hotpot@20": 64.5},
]
STEPS = ("mentions", "entity-linking", "event-linking", "decomposition", "decomposition-linking", "coarse-filter", "rerank",
         "coverage")
PERCENT = ("Hotpot@5", "Hotpot@20", "both supporting in top10", "linking recall")
COLUMNS = ("retriever", "Hotpot@5", "Hotpot@20", "both supporting in top10", "linking recall", "docs linked", "p50 ms")


def hotpot_questions(limit: int | None) -> list[Any]:
    from hiera.eval.questions import load_questions

    qs = load_questions(data_dir() / "hotpotqa" / "dev_subsampled.public250.jsonl", "hotpotqa")
    qs = [q for q in qs if not {a.strip().lower() for a in q.answers} <= {"yes", "no"}]
    return qs[:limit] if limit else qs


def runs(reranker: str | None) -> list[tuple[str, str, dict[str, Any]]]:
    rr = {"reranker": reranker} if reranker else {}
    return [  # the linking rows first: on a busy machine, whatever finishes first is what matters most
        ("linking", "linking", rr),
        ("linking, no rerank", "linking", {}),
        ("dhr over linked documents", "dhr", {"doc_stage": "linked"}),
        ("bm25", "bm25", {}),
        ("dense", "dense", {}),
        ("hybrid", "hybrid", {}),
        ("dhr", "dhr", {}),
        ("linking, no decomposition", "linking", {**rr, "decomposer": "none"}),
        ("linking, no event linking", "linking", {**rr, "event_titles": 0}),
        ("linking, no rerank, no sub-question slots", "linking", {"subquestion_slots": 0}),
        ("linking, no rerank, no coverage", "linking", {"hop_slot": 0, "subquestion_slots": 0}),
        ("linking, no rerank, BM25 order (paper)", "linking", {"hop_slot": 0, "subquestion_slots": 0, "link_weight": 0.0}),
    ]


def evaluate(col: Any, name: str, params: dict[str, Any], questions: list[Any], batch: int = 16) -> dict[str, Any]:
    from hiera.eval.match import has_answer
    from hiera.retrieve import get_retriever

    r = get_retriever(name, col, **{**PINNED.get(name, {}), **params})
    at5 = at20 = both = linked_both = 0
    linked_sizes: list[int] = []
    steps: dict[str, list[float]] = defaultdict(list)
    totals: list[float] = []
    for s in range(0, len(questions), batch):
        chunk = questions[s : s + batch]
        t = time.perf_counter()
        results = r.batch_search([q.text for q in chunk], k=100)
        per_q = (time.perf_counter() - t) * 1000 / len(chunk)
        for q, res in zip(chunk, results, strict=True):
            totals.append(per_q)
            ans = [has_answer(q.answers, h.text) for h in res.hits[:20]]
            at5 += any(ans[:5])
            at20 += any(ans)
            docs = list(dict.fromkeys(h.doc_id for h in res.hits))[:10]
            both += q.gold_docs <= set(docs)
            trace = {st.name: st for st in res.trace}
            if "linked-documents" in trace:
                ids = {e["doc_id"] for e in trace["linked-documents"].detail["linked"]}
                linked_both += q.gold_docs <= ids
                linked_sizes.append(len(ids))
                for st in STEPS:
                    if st in trace:
                        steps[st].append(trace[st].ms)
    n = len(questions)
    out: dict[str, Any] = {
        "Hotpot@5": round(100 * at5 / n, 1),
        "Hotpot@20": round(100 * at20 / n, 1),
        "both supporting in top10": round(100 * both / n, 1),
        "p50 ms": round(sorted(totals)[len(totals) // 2], 1),
    }
    if linked_sizes:
        out["linking recall"] = round(100 * linked_both / n, 1)
        out["docs linked"] = round(sum(linked_sizes) / len(linked_sizes), 1)
        out["step ms"] = {k: round(sum(v) / len(v), 1) for k, v in steps.items()}
    return out


def decomposer_quality(limit: int | None) -> dict[str, Any]:
    from hiera.link.rules import RulesDecomposer
    from hiera.text import f1

    data = json.loads((data_dir() / "strategyqa" / "strategyqa_train.json").read_text(encoding="utf-8"))
    data = data[:limit] if limit else data
    rules = RulesDecomposer()
    split = 0
    f1s: list[float] = []
    base: list[float] = []
    split_f1: list[tuple[float, float]] = []  # (sub-questions, question alone) on the questions that were split
    shapes: dict[str, int] = defaultdict(int)
    t = time.perf_counter()
    for rec in data:
        gold = " ".join(rec["decomposition"])
        d = rules.decompose(rec["question"])
        shapes[d.shape] += 1
        subs = [s.text for s in d.sub_questions]
        split += len(subs) >= 2
        f1s.append(f1(" ".join(subs) if subs else rec["question"], [gold]))
        base.append(f1(rec["question"], [gold]))
        if len(subs) >= 2:
            split_f1.append((f1s[-1], base[-1]))
    n = len(data)
    return {
        "questions": n,
        "split into >= 2 (%)": round(100 * split / n, 1),
        "token F1 (%)": round(100 * sum(f1s) / n, 1),
        "token F1, question alone (%)": round(100 * sum(base) / n, 1),
        "token F1 on split questions (%)": round(100 * sum(a for a, _ in split_f1) / max(1, len(split_f1)), 1),
        "token F1 on split questions, question alone (%)": round(100 * sum(b for _, b in split_f1) / max(1, len(split_f1)), 1),
        "shapes": dict(shapes),
        "ms per question": round((time.perf_counter() - t) * 1000 / n, 1),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reranker", default=str(WORK / "reranker-hybrid"),
                    help="cross-encoder for the linking rows (hiera train-reranker; trained on SQuAD, not HotpotQA: "
                         "setup in bench/expected.yaml)")
    ap.add_argument("--limit", type=int, default=None, help="only the first N HotpotQA questions (after yes/no removal)")
    ap.add_argument("--strategyqa-limit", type=int, default=None, help="only the first N StrategyQA questions")
    ap.add_argument("--only", default=None, help="row labels to run, separated by ';' (default: all)")
    ap.add_argument("--name", default="linking", help="the report's name: bench/out/NAME.json")
    args = ap.parse_args()
    ensure_pool()
    from hiera.builds import open_collection

    reranker = args.reranker if args.reranker and Path(args.reranker).is_dir() else None
    if reranker is None:
        print(f"no reranker at {args.reranker}: the linking rows keep the coarse order")
    col = open_collection(ROOT)
    col.warmup()
    from hiera.link.pipeline import linker_for

    t = time.perf_counter()
    linker_for(col).warm()  # spaCy, the alias index and its title vectors: once, outside the per-step timings
    print(f"linking warm-up (spaCy, alias index, title vectors): {time.perf_counter() - t:.1f}s")
    questions = hotpot_questions(args.limit)
    report = Report(args.name, COLUMNS)
    wanted = {w.strip() for w in args.only.split(";")} if args.only else None
    for label, name, params in runs(reranker):
        if wanted and label not in wanted:
            continue
        t = time.perf_counter()
        m = evaluate(col, name, params, questions)
        row = {"retriever": label, **{k: m.get(k, "–") for k in COLUMNS[1:]}}
        # the table shows percentages; the JSON's results hold fractions, as bench/expected.yaml compares them
        frac = {k: round(v / 100, 4) if k in PERCENT else v for k, v in m.items()}
        report.add(row, {**frac, "method": name, "params": params, "seconds": round(time.perf_counter() - t, 1)})
    for row in PAPER:
        report.rows.append({**row, **{c: "–" for c in COLUMNS[3:]}})
    latency = Report("linking-latency")
    for label, res in report.results.items():
        if "step ms" in res:
            latency.add({"retriever": label, **res["step ms"]}, echo=False)
    sqa = decomposer_quality(args.strategyqa_limit)
    print(f"\nStrategyQA decomposition (rules): {sqa}")
    report.print(f"HotpotQA, {len(questions)} questions (yes/no removed) over {col.n_docs} pool paragraphs. "
                 "Recall in %; paper rows are the published figures (full Wikipedia, 7,405 dev questions).")
    latency.print("Per-step latency of the linking rows, mean ms per question")
    res = report.results
    singles = {k: res[k]["Hotpot@5"] for k in ("bm25", "dense", "hybrid", "dhr") if k in res}
    targets: dict[str, Any] = {}
    if singles and "linking" in res:
        best = max(singles, key=lambda k: singles[k])
        delta = round(100 * (res["linking"]["Hotpot@5"] - singles[best]), 1)
        targets = {"best single retriever": best, "linking minus best single (points)": delta, "met (>= 5)": delta >= 5,
                   "linking recall met (>= 0.70)": res["linking"].get("linking recall", 0) >= 0.70}
        print(f"\ntarget: linking Hotpot@5 - {best} = {delta:+.1f} points (>= +5: {'met' if delta >= 5 else 'not met'})")
    report.write(questions=len(questions), reranker=reranker, latency=latency.rows, strategyqa=sqa, targets=targets)


if __name__ == "__main__":
    main()
