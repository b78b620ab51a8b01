"""Wikipedia QA over a pooled corpus: our stand-in for DHR's Tables 2, 3, 5, 7.

Corpus: ``bench/work/pooled`` (see ``bench/pooled.py``: SQuAD dev, the 44
SQuAD train articles, the HotpotQA paragraph pool and the ovos Wikipedia
summaries). Questions: SQuAD ``dev-v1.1.first24.json``.

Every retriever is evaluated for passage top-k (answer containment in the
passage text) and document top-k; DHR is run once per document stage
(issue 7). λ (``lam``) and ``top_docs`` (the paper's k1) are tuned on SQuAD
*train* questions (never on the reported dev questions) unless ``--no-tune``;
the values land in the JSON's ``tuned`` section and in the row labels, as the
``--set`` a ``hiera eval`` would take.

    python -m bench.wiki_qa [--limit N] [--no-tune] [--stages summary,mean,...]

The first run ingests and encodes ~40k texts (≈ 20 min on 2 cores; cached
under $HIERA_CACHE_DIR); later runs take minutes.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from bench.common import DOC_TOPK, PINNED, TOPK, Report, data_dir, label_params, percent, tune
from bench.pooled import POOLED, ensure_pooled

RETRIEVERS = ["bm25", "bm25-doc", "dense", "dhr", "dhr-parallel", "hybrid", "bm25-dhr"]
COLUMNS = ["retriever", *TOPK, *DOC_TOPK, "p50 ms", "p95 ms", "stages ms"]


def main() -> None:
    from hiera.score.docstage import DOC_STAGES

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--root", type=Path, default=POOLED)
    ap.add_argument("--limit", type=int, default=None, help="first N dev questions only")
    ap.add_argument("--tune-limit", type=int, default=1000, help="train questions used for tuning")
    ap.add_argument("--no-tune", action="store_true")
    ap.add_argument("--retrievers", default=",".join(RETRIEVERS))
    ap.add_argument("--stages", default=",".join(DOC_STAGES), help="DHR document stages to compare")
    ap.add_argument("--latency-sample", type=int, default=200)
    ap.add_argument("--name", default="wiki_qa")
    ap.add_argument("--hybrid-passages", action="store_true",
                    help="also tune and report each stage with the hybrid passage stage (passage_alpha fitted)")
    ap.add_argument("--target-k", type=int, default=20, help="tune for top-K accuracy (20: the paper)")
    args = ap.parse_args()

    from hiera.builds import open_collection
    from hiera.eval.questions import load_questions
    from hiera.eval.run import evaluate_retriever
    from hiera.retrieve import get_retriever

    data = data_dir()
    ensure_pooled(args.root)
    col = open_collection(args.root)
    col.warmup()
    stats = col.store.stats()
    print(f"collection: {stats['documents']} documents, {stats['passages']} passages")
    dev = load_questions(data / "squad" / "dev-v1.1.first24.json", "squad", limit=args.limit, rules=col.store.rules)
    train = load_questions(data / "squad" / "train-du2017-44articles.json", "squad", rules=col.store.rules)
    # A fixed, spread-out sample of train questions for tuning.
    step = max(1, len(train) // args.tune_limit)
    tune_qs = train[::step][: args.tune_limit]

    report = Report(args.name, COLUMNS)

    def record(label: str, retriever, extra: dict | None = None, params: dict | None = None) -> None:
        t = time.perf_counter()
        run = evaluate_retriever(col, label, dev, (1, 5, 20, 100), retriever=retriever, latency_sample=args.latency_sample)
        m = run.metrics
        row = {"retriever": label, **(extra or {}), **percent(m, TOPK + DOC_TOPK)}
        row["p50 ms"] = round(m.get("latency_ms_p50", float("nan")), 1)
        row["p95 ms"] = round(m.get("latency_ms_p95", float("nan")), 1)
        row["stages ms"] = ", ".join(f"{k} {v:.1f}" for k, v in run.stage_ms.items())
        result = {"metrics": m, "stage_ms": run.stage_ms, **(extra or {}), **({"params": params} if params else {})}
        report.add(row, result,
                   echo=f"{label}: top1 {row['top1']} top20 {row['top20']} doc_top1 {row['doc_top1']} "
                        f"doc_top100 {row['doc_top100']} ({time.perf_counter() - t:.0f}s)")

    for name in [r for r in args.retrievers.split(",") if r]:
        record(name, get_retriever(name, col, **PINNED.get(name, {})))

    from hiera.spec import PASSAGE_ALPHA

    tuned = {}
    variants = [(s, False) for s in args.stages.split(",") if s]
    if args.hybrid_passages and not args.no_tune:
        variants += [(s, True) for s in args.stages.split(",") if s]
    for stage, hybrid in variants:
        params: dict = {"doc_stage": stage}
        key = stage + ("+bm25-passages" if hybrid else "")
        if not args.no_tune:
            t = time.perf_counter()
            pas = PASSAGE_ALPHA.grid if hybrid else None
            best, res = tune(col, tune_qs, doc_stage=stage, passage_alphas=pas, target_k=args.target_k)
            params.update(best)
            tuned[key] = {**best, f"train_top{args.target_k}": res.target, "train_top1": res.top1,
                          "seconds": time.perf_counter() - t}
        label = f"dhr[{key}]" + ("" if args.no_tune else " " + label_params(params))
        record(label, get_retriever("dhr", col, **{**PINNED["dhr"], **params}), {"doc_stage": stage}, params)

    report.print(f"Pooled corpus: {stats['documents']} documents, {stats['passages']} passages; "
                 f"{len(dev)} SQuAD dev questions (first 24 articles). Accuracy in %.")
    if tuned:
        print("\nTuned on", len(tune_qs), "SQuAD train questions:", json.dumps(tuned))
    report.write(corpus=stats, questions=len(dev), tuned=tuned)


if __name__ == "__main__":
    main()
