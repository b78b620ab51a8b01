"""Wikipedia QA over a pooled corpus: our stand-in for DHR's Tables 2, 3, 5, 7.

Corpus (one collection): SQuAD dev (both halves), the 44 SQuAD train
articles, the HotpotQA paragraph pool and the ~10k ovos Wikipedia summaries
(distractors). Questions: SQuAD ``dev-v1.1.first24.json``.

Every retriever is evaluated for passage top-k (answer containment in the
passage text) and document top-k; DHR is run once per document stage
(issue 7). λ and k1 are tuned on SQuAD *train* questions (never on the
reported dev questions) unless ``--no-tune``.

    python bench/wiki_qa.py [--limit N] [--no-tune] [--stages summary,mean,...]

The first run ingests and encodes ~40k texts (≈ 20 min on 2 cores; cached
under $HIERA_CACHE_DIR); later runs take minutes.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from common import WORK, data_dir, ensure_collection, table, write_json  # noqa: E402

from hiera.collection import Collection  # noqa: E402
from hiera.corpus.readers.ovos import ovos_summaries_path  # noqa: E402
from hiera.eval.questions import load_questions  # noqa: E402
from hiera.eval.run import evaluate_retriever  # noqa: E402
from hiera.eval.tune import tune_dhr  # noqa: E402
from hiera.retrieve import get_retriever  # noqa: E402
from hiera.retrieve.docstage import DOC_STAGES  # noqa: E402

RETRIEVERS = ["bm25", "bm25-doc", "dense", "dhr", "dhr-parallel", "hybrid", "bm25-dhr"]


def pooled_sources(data: Path) -> list[tuple[list[Path], str]]:
    sq = data / "squad"
    return [
        ([sq / "dev-v1.1.first24.json", sq / "dev-v1.1.last24.corpus-only.json", sq / "train-du2017-44articles.json"], "squad"),
        ([data / "hotpotqa" / "paragraph_pool.500q.jsonl"], "hotpotqa-pool"),
        ([ovos_summaries_path()], "ovos-summaries"),
    ]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--root", type=Path, default=WORK / "pooled")
    ap.add_argument("--limit", type=int, default=None, help="first N dev questions only")
    ap.add_argument("--tune-limit", type=int, default=1000, help="train questions used for tuning")
    ap.add_argument("--no-tune", action="store_true")
    ap.add_argument("--retrievers", default=",".join(RETRIEVERS))
    ap.add_argument("--stages", default=",".join(DOC_STAGES), help="DHR document stages to compare")
    ap.add_argument("--latency-sample", type=int, default=200)
    ap.add_argument("--name", default="wiki_qa")
    args = ap.parse_args()
    data = data_dir()
    ensure_collection(args.root, pooled_sources(data))
    col = Collection(args.root)
    col.warmup()
    stats = col.store.stats()
    print(f"collection: {stats['documents']} documents, {stats['passages']} passages")
    dev = load_questions(data / "squad" / "dev-v1.1.first24.json", "squad", limit=args.limit)
    train = load_questions(data / "squad" / "train-du2017-44articles.json", "squad")
    # A fixed, spread-out sample of train questions for tuning.
    step = max(1, len(train) // args.tune_limit)
    tune_qs = train[::step][: args.tune_limit]

    rows, results = [], {}

    def record(label: str, retriever, extra: dict | None = None) -> None:
        t = time.perf_counter()
        run = evaluate_retriever(col, label, dev, (1, 5, 20, 100), retriever=retriever, latency_sample=args.latency_sample)
        m = run.metrics
        row = {"retriever": label, **(extra or {})}
        for key in ("top1", "top5", "top20", "top100", "doc_top1", "doc_top5", "doc_top20", "doc_top100"):
            row[key] = round(100 * m[key], 1) if key in m else "–"
        row["p50 ms"] = round(m.get("latency_ms_p50", float("nan")), 1)
        row["p95 ms"] = round(m.get("latency_ms_p95", float("nan")), 1)
        row["stages ms"] = ", ".join(f"{k} {v:.1f}" for k, v in run.stage_ms.items())
        rows.append(row)
        results[label] = {"metrics": m, "stage_ms": run.stage_ms, **(extra or {})}
        print(f"{label}: top1 {row['top1']} top20 {row['top20']} doc_top1 {row['doc_top1']} doc_top100 {row['doc_top100']} "
              f"({time.perf_counter() - t:.0f}s)", flush=True)

    for name in [r for r in args.retrievers.split(",") if r]:
        record(name, get_retriever(name, col))

    tuned = {}
    for stage in [s for s in args.stages.split(",") if s]:
        params = {"doc_stage": stage}
        if not args.no_tune:
            t = time.perf_counter()
            res = tune_dhr(col, tune_qs, k1s=(10, 20, 50, 100), doc_stage=stage, progress=False)
            params.update(lam=res.lam, k1=res.k1)
            tuned[stage] = {"lambda": res.lam, "k1": res.k1, "train_top20": res.target, "train_top1": res.top1,
                            "seconds": time.perf_counter() - t}
        label = f"dhr[{stage}]" + ("" if args.no_tune else f" λ={params['lam']} k1={params['k1']}")
        record(label, get_retriever("dhr", col, **params), {"doc_stage": stage})

    cols = ["retriever", "top1", "top5", "top20", "top100", "doc_top1", "doc_top5", "doc_top20", "doc_top100",
            "p50 ms", "p95 ms", "stages ms"]
    print()
    print(f"Pooled corpus: {stats['documents']} documents, {stats['passages']} passages; "
          f"{len(dev)} SQuAD dev questions (first 24 articles). Accuracy in %.")
    print(table(rows, cols))
    if tuned:
        print("\nTuned on", len(tune_qs), "SQuAD train questions:", json.dumps(tuned))
    path = write_json(args.name, {"corpus": stats, "questions": len(dev), "results": results, "tuned": tuned, "rows": rows})
    print(f"\nwrote {path}")


if __name__ == "__main__":
    main()
