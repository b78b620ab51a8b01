"""BEIR SciFact: nDCG@10 and recall@100 for bm25, dense and hybrid.

Published: BM25 0.665 (BEIR paper, Anserini, title + text), all-MiniLM-L6-v2
about 0.645 (sentence-transformers / MTEB, whole abstract truncated at 256
tokens). To reproduce the published setup each abstract is ONE passage
(``max_words=1000``): DPR-style 100-word passages are a different experiment,
reported in the second block as ``*-100w``.

    python bench/beir_scifact.py [--no-split-run]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from common import WORK, data_dir, ensure_collection, table, write_json  # noqa: E402

from hiera.collection import Collection  # noqa: E402
from hiera.corpus.tree import PassageRules  # noqa: E402
from hiera.eval.questions import load_questions  # noqa: E402
from hiera.eval.run import evaluate_retriever  # noqa: E402

PUBLISHED = {"bm25": 0.665, "dense": 0.645}


def run(root: Path, rules: PassageRules, suffix: str, questions, rows: list, results: dict) -> None:
    corpus = data_dir() / "beir" / "scifact" / "corpus.jsonl"
    ensure_collection(root, [([corpus], "beir")], rules=rules)
    col = Collection(root)
    col.warmup()
    for name in ("bm25-doc", "bm25", "dense", "hybrid"):
        m = evaluate_retriever(col, name, questions, (10, 100), latency_sample=100, progress=False).metrics
        label = name + suffix
        pub = PUBLISHED.get(name if name != "bm25-doc" else "bm25") if not suffix else None
        rows.append({
            "retriever": label,
            "nDCG@10": round(m["ndcg@10"], 4),
            "recall@100": round(m["recall@100"], 4),
            "published nDCG@10": pub if pub is not None else "–",
            "Δ": round(m["ndcg@10"] - pub, 4) if pub is not None else "–",
            "p50 ms": round(m["latency_ms_p50"], 1),
        })
        results[label] = m
        print(rows[-1], flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--no-split-run", action="store_true", help="skip the 100-word passage variant")
    args = ap.parse_args()
    questions = load_questions(data_dir() / "beir" / "scifact", "beir")
    rows: list = []
    results: dict = {}
    run(WORK / "scifact-whole", PassageRules(max_words=1000, summary_lead_words=1000), "", questions, rows, results)
    if not args.no_split_run:
        run(WORK / "scifact-100w", PassageRules(), "-100w", questions, rows, results)
    print(f"\nBEIR SciFact, {len(questions)} test queries (document-level runs; passages aggregated by max).")
    print(table(rows))
    print(f"\nwrote {write_json('beir_scifact', {'results': results, 'rows': rows})}")


if __name__ == "__main__":
    main()
