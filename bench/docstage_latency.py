"""Latency of each DHR document stage on the pooled Wikipedia corpus (issue 7).

Times ``score_docs`` alone (query vectors computed beforehand, one FAISS
thread) for ``k1`` = 100 over the first N SQuAD dev questions, and the whole
``dhr`` search step after query encoding, so the cost the document stage adds
can be read directly. Run it on a quiet machine: the figures are wall-clock.

    python bench/docstage_latency.py [--queries 300] [--root bench/work/pooled]
    python bench/docstage_latency.py --root bench/work/pooled-hnsw   # HNSW32 indexes (see wiki_qa_hnsw.py)

Writes ``bench/out/docstage_latency_<collection directory name>.json``.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from common import WORK, data_dir, table, write_json  # noqa: E402

from hiera.collection import Collection  # noqa: E402
from hiera.eval.questions import load_questions  # noqa: E402
from hiera.index.dense import set_threads  # noqa: E402
from hiera.retrieve import get_retriever  # noqa: E402
from hiera.retrieve.docstage import DOC_STAGES, score_docs  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--root", type=Path, default=WORK / "pooled")
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--k1", type=int, default=100)
    ap.add_argument("--vectors", choices=["float16", "float32"], default="float16", help="Collection(vectors=...)")
    ap.add_argument("--stages", default=",".join(s for s in DOC_STAGES if s != "fused"))
    args = ap.parse_args()
    set_threads(1)
    col = Collection(args.root, vectors=args.vectors)
    col.warmup()
    qs = [q.text for q in load_questions(data_dir() / "squad" / "dev-v1.1.first24.json", "squad", limit=args.queries)]
    dhr = get_retriever("dhr", col)
    rows = []
    for stage in [s for s in args.stages.split(",") if s]:
        ctxs = dhr._prepare(qs, {**dhr.defaults, "doc_stage": stage})
        for q, ctx in zip(qs[:20], ctxs, strict=False):  # warm caches
            score_docs(col, stage, q, ctx, args.k1)
        doc_ms, step_ms = [], []
        for q, ctx in zip(qs, ctxs, strict=True):
            t = time.perf_counter()
            score_docs(col, stage, q, ctx, args.k1)
            doc_ms.append((time.perf_counter() - t) * 1000)
            t = time.perf_counter()
            dhr._search(q, 100, "passage", {**dhr.defaults, "doc_stage": stage, "k1": args.k1}, [], ctx)
            step_ms.append((time.perf_counter() - t) * 1000)
        rows.append({"stage": stage, "doc stage p50 ms": round(float(np.percentile(doc_ms, 50)), 2),
                     "doc stage p95 ms": round(float(np.percentile(doc_ms, 95)), 2),
                     "dhr search step p50 ms": round(float(np.percentile(step_ms, 50)), 2)})
        print(rows[-1], flush=True)
    print(f"\n{col.n_docs} documents, {col.n_passages} passages; {len(qs)} queries; k1 = {args.k1}; 1 FAISS thread; "
          "query encoding excluded")
    print(table(rows))
    print(f"wrote {write_json(f'docstage_latency_{args.root.name}' + ('_f32' if args.vectors == 'float32' else ''), {'rows': rows, 'queries': len(qs), 'k1': args.k1, 'root': str(args.root), 'faiss': col.manifest.faiss, 'vectors': args.vectors})}")


if __name__ == "__main__":
    main()
