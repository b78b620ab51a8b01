"""HotpotQA (250 public dev questions) over the 4,858-paragraph pool.

Answer recall@5 / @20 ("Hotpot@5/@20" in the decomposition paper: a passage
in the top k contains an answer span) and the share of questions with both
supporting paragraphs among the top 10 documents.

    python -m bench.hotpotqa [--build-only]

``--build-only`` only ingests and builds ``bench/work/hotpot-pool`` (the
``setup:`` of the ``hiera eval`` rows in ``bench/expected.yaml``).
"""

from __future__ import annotations

import argparse

from bench.common import PINNED, WORK, Report, data_dir, ensure_collection

RETRIEVERS = ("bm25", "dense", "hybrid", "dhr", "bm25-dhr")
ROOT = WORK / "hotpot-pool"


def ensure_pool() -> None:
    ensure_collection(ROOT, [([data_dir() / "hotpotqa" / "paragraph_pool.500q.jsonl"], "hotpotqa-pool")])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build-only", action="store_true", help="build the collection, evaluate nothing")
    args = ap.parse_args()
    ensure_pool()
    if args.build_only:
        return

    from hiera.builds import open_collection
    from hiera.eval.questions import load_questions
    from hiera.eval.run import evaluate_retriever
    from hiera.retrieve import get_retriever

    col = open_collection(ROOT)
    col.warmup()
    questions = load_questions(data_dir() / "hotpotqa" / "dev_subsampled.public250.jsonl", "hotpotqa")
    report = Report("hotpotqa")
    for name in RETRIEVERS:
        r = get_retriever(name, col, **PINNED.get(name, {}))
        m = evaluate_retriever(col, name, questions, (5, 10, 20), retriever=r, latency_sample=100, progress=False).metrics
        report.add({
            "retriever": name,
            "Hotpot@5": round(100 * m["top5"], 1),
            "Hotpot@20": round(100 * m["top20"], 1),
            "both supporting in top10": round(100 * m.get("doc_all_top10", float("nan")), 1),
            "gold doc top10": round(100 * m.get("doc_top10", float("nan")), 1),
            "p50 ms": round(m["latency_ms_p50"], 1),
        }, m)
    report.print(f"HotpotQA, {len(questions)} questions over {col.n_docs} pool paragraphs. Recall in %.")
    report.write()


if __name__ == "__main__":
    main()
