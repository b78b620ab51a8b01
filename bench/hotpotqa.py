"""HotpotQA (250 public dev questions) over the 4,858-paragraph pool.

Answer recall@5 / @20 ("Hotpot@5/@20" in the decomposition paper: a passage
in the top k contains an answer span) and the share of questions with both
supporting paragraphs among the top 10 documents.

    python bench/hotpotqa.py
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from common import WORK, data_dir, ensure_collection, table, write_json  # noqa: E402

from hiera.collection import Collection  # noqa: E402
from hiera.eval.questions import load_questions  # noqa: E402
from hiera.eval.run import evaluate_retriever  # noqa: E402

RETRIEVERS = ("bm25", "dense", "hybrid", "dhr", "bm25-dhr")


def main() -> None:
    hp = data_dir() / "hotpotqa"
    root = WORK / "hotpot-pool"
    ensure_collection(root, [([hp / "paragraph_pool.500q.jsonl"], "hotpotqa-pool")])
    col = Collection(root)
    col.warmup()
    questions = load_questions(hp / "dev_subsampled.public250.jsonl", "hotpotqa")
    rows, results = [], {}
    for name in RETRIEVERS:
        m = evaluate_retriever(col, name, questions, (5, 10, 20), latency_sample=100, progress=False).metrics
        rows.append({
            "retriever": name,
            "Hotpot@5": round(100 * m["top5"], 1),
            "Hotpot@20": round(100 * m["top20"], 1),
            "both supporting in top10": round(100 * m.get("doc_all_top10", float("nan")), 1),
            "gold doc top10": round(100 * m.get("doc_top10", float("nan")), 1),
            "p50 ms": round(m["latency_ms_p50"], 1),
        })
        results[name] = m
        print(rows[-1], flush=True)
    print(f"\nHotpotQA, {len(questions)} questions over {col.n_docs} pool paragraphs. Recall in %.")
    print(table(rows))
    print(f"\nwrote {write_json('hotpotqa', {'results': results, 'rows': rows})}")


if __name__ == "__main__":
    main()
