"""BEIR SciFact: nDCG@10 and recall@100 for bm25, dense and hybrid.

Published: BM25 0.665 (BEIR paper, Anserini, title + text), all-MiniLM-L6-v2
about 0.645 (sentence-transformers / MTEB, whole abstract truncated at 256
tokens). To reproduce the published setup each abstract is ONE passage
(``max_words=1000``, collection ``bench/work/scifact-whole``): DPR-style
100-word passages are a different experiment, reported in the second block as
``*-100w`` (``bench/work/scifact-100w``).

    python -m bench.beir_scifact [--no-split-run] [--build-only]

``--build-only`` only ingests and builds the collections (the ``setup:`` of
the ``hiera eval`` rows in ``bench/expected.yaml``).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from bench.common import WORK, Report, data_dir, ensure_collection

PUBLISHED = {"bm25": 0.665, "dense": 0.645}
RETRIEVERS = ("bm25-doc", "bm25", "dense", "hybrid")


def variants(split_run: bool) -> list[tuple[Path, dict, str]]:
    """(collection, PassageRules arguments, label suffix) per run."""
    out = [(WORK / "scifact-whole", {"max_words": 1000, "summary_lead_words": 1000}, "")]
    if split_run:
        out.append((WORK / "scifact-100w", {}, "-100w"))
    return out


def ensure(root: Path, rules: dict) -> None:
    from hiera.corpus.tree import PassageRules

    ensure_collection(root, [([data_dir() / "beir" / "scifact" / "corpus.jsonl"], "beir")], rules=PassageRules(**rules))


def run(root: Path, suffix: str, questions, report: Report) -> None:
    from hiera.builds import open_collection
    from hiera.eval.run import evaluate_retriever

    col = open_collection(root)
    col.warmup()
    for name in RETRIEVERS:
        m = evaluate_retriever(col, name, questions, (10, 100), latency_sample=100, progress=False).metrics
        label = name + suffix
        pub = PUBLISHED.get(name if name != "bm25-doc" else "bm25") if not suffix else None
        report.add({
            "retriever": label,
            "nDCG@10": round(m["ndcg@10"], 4),
            "recall@100": round(m["recall@100"], 4),
            "published nDCG@10": pub if pub is not None else "–",
            "Δ": round(m["ndcg@10"] - pub, 4) if pub is not None else "–",
            "p50 ms": round(m["latency_ms_p50"], 1),
        }, m)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--no-split-run", action="store_true", help="skip the 100-word passage variant")
    ap.add_argument("--build-only", action="store_true", help="build the collections, evaluate nothing")
    args = ap.parse_args()
    todo = variants(not args.no_split_run)
    for root, rules, _ in todo:
        ensure(root, rules)
    if args.build_only:
        return

    from hiera.eval.questions import load_questions

    questions = load_questions(data_dir() / "beir" / "scifact", "beir")
    report = Report("beir_scifact")
    for root, _, suffix in todo:
        run(root, suffix, questions, report)
    report.print(f"BEIR SciFact, {len(questions)} test queries (document-level runs; passages aggregated by max).")
    report.write()


if __name__ == "__main__":
    main()
