"""Latency of each DHR document stage on the pooled Wikipedia corpus (issue 7).

Times the document stage alone (``DocStage.top``) (query vectors computed beforehand, one FAISS
thread) for ``top_docs`` = 100 over the first N SQuAD dev questions, and the
whole ``dhr`` search step after query encoding, so the cost the document stage
adds can be read directly. Run it on a quiet machine: the figures are wall-clock.

    python -m bench.docstage_latency [--queries 300] [--root bench/work/pooled]
    python -m bench.docstage_latency --root bench/work/pooled-hnsw   # HNSW32 indexes (python -m bench.wiki_qa_hnsw --build-only)

Writes ``bench/out/docstage_latency_<collection directory name>.json``.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

from bench.common import Report, data_dir
from bench.pooled import POOLED


def main() -> None:
    from hiera.score.docstage import DOC_STAGES

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--root", type=Path, default=POOLED)
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--top-docs", "--k1", dest="top_docs", type=int, default=100,
                    help="documents the document stage keeps (the paper's k1)")
    ap.add_argument("--vectors", choices=["float16", "float32"], default="float16", help="open_collection(vectors=...)")
    ap.add_argument("--stages", default=",".join(s for s in DOC_STAGES if s != "fused"))
    args = ap.parse_args()

    from hiera.builds import open_collection
    from hiera.eval.questions import load_questions
    from hiera.index.dense import set_threads
    from hiera.retrieve import get_retriever
    from hiera.score.docstage import stage as doc_stage

    set_threads(1)
    col = open_collection(args.root, vectors=args.vectors)
    col.warmup()
    qs = [q.text for q in load_questions(data_dir() / "squad" / "dev-v1.1.first24.json", "squad", limit=args.queries)]
    dhr = get_retriever("dhr", col)
    report = Report(f"docstage_latency_{args.root.name}" + ("_f32" if args.vectors == "float32" else ""))
    for stage in [s for s in args.stages.split(",") if s]:
        scorer = doc_stage(stage)
        params = {**dhr.defaults, "doc_stage": stage, "top_docs": args.top_docs}
        batch = dhr._prepare(qs, params)
        for q in list(batch)[:20]:  # warm caches
            scorer.top(col, q, args.top_docs)
        doc_ms, step_ms = [], []
        for q in batch:
            t = time.perf_counter()
            scorer.top(col, q, args.top_docs)
            doc_ms.append((time.perf_counter() - t) * 1000)
            one = dhr._prepare([q.text], params)  # re-encoded outside the clock: the step is timed alone
            t = time.perf_counter()
            dhr._search_batch(one, 100, "passage", params, [[]])
            step_ms.append((time.perf_counter() - t) * 1000)
        report.add({"stage": stage, "doc stage p50 ms": round(float(np.percentile(doc_ms, 50)), 2),
                    "doc stage p95 ms": round(float(np.percentile(doc_ms, 95)), 2),
                    "dhr search step p50 ms": round(float(np.percentile(step_ms, 50)), 2)})
    report.print(f"{col.n_docs} documents, {col.n_passages} passages; {len(qs)} queries; top_docs = {args.top_docs}; "
                 "1 FAISS thread; query encoding excluded")
    report.write(queries=len(qs), top_docs=args.top_docs, root=str(args.root), faiss=col.manifest.faiss,
                 vectors=args.vectors)


if __name__ == "__main__":
    main()
