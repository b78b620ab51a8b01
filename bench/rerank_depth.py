"""Reranking that pays (issue 20): passage top-k against rerank depth, per cross-encoder.

For each question of ``dev-v1.1.first24.json`` (the first ``--questions``),
the base retriever (default: DHR with the hybrid passage stage at its tuned
values, expected.yaml's ``wiki_qa/dhr-hybrid-passages-tuned``) returns its top
``max(depths)`` passages once; each cross-encoder scores all of them once.
Reranking at depth D is then exactly what ``RerankRetriever(depth=D)`` does:
the first D hits ordered by the cross-encoder's probability (stable), the
rest in base order after them; with ``--mixes``, also by ``w · probability +
(1 − w) · the base score min-max normalized over those D hits`` (w = 1 is the
cross-encoder alone), the (depth, w) pair chosen on ``--tune-questions``
SQuAD *train* questions and then reported on the dev questions. Depth 0 is the base retriever alone. Top-k =
the answer string in one of the first k passages (DPR matching, passage text
only). Rerank cost per question is measured at the largest depth and is
linear in the depth.

    python -m bench.rerank_depth --rerankers bench/work/reranker-squad,bench/work/reranker-hybrid [--questions 500]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

from bench.common import WORK, Report, data_dir, write_json
from hiera.builds import open_collection
from hiera.crossencoder import Reranker, hit_input
from hiera.eval.match import hit_list
from hiera.eval.questions import load_questions
from hiera.retrieve import get_retriever

TUNED = {"doc_stage": "hybrid-max", "lam": 0.85, "top_docs": 10, "passage_alpha": 0.3}
KS = (1, 5, 20)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--collection", default=str(WORK / "pooled"))
    ap.add_argument("--rerankers", default=str(WORK / "reranker-hybrid"), help="comma list of reranker directories")
    ap.add_argument("--questions", type=int, default=500)
    ap.add_argument("--depths", default="0,5,10,20,50")
    ap.add_argument("--method", default="dhr")
    ap.add_argument("--mixes", default="1", help="comma list of cross-encoder weights w in [0, 1]")
    ap.add_argument("--tune-questions", type=int, default=0, help="SQuAD train questions to choose (depth, w) on")
    args = ap.parse_args(argv)
    depths = sorted({int(d) for d in args.depths.split(",")})
    mixes = [float(w) for w in args.mixes.split(",")]
    deepest = max(max(depths), max(KS))
    col = open_collection(args.collection)
    dev = list(load_questions(data_dir() / "squad" / "dev-v1.1.first24.json", "squad"))[: args.questions]
    train = list(load_questions(data_dir() / "squad" / "train-du2017-44articles.json", "squad"))
    train = train[:: max(1, len(train) // args.tune_questions)][: args.tune_questions] if args.tune_questions else []
    params = TUNED if args.method == "dhr" else {}
    base = get_retriever(args.method, col)
    sep = col.store.title_sep
    t = time.perf_counter()
    runs = {}
    for split, qs in (("dev", dev), ("train", train)):
        if not qs:
            continue
        results = base.batch_search([q.text for q in qs], k=deepest, level="passage", **params)
        rel = [np.array(hit_list(r.hits, q.answers, q.answer_mode)) for q, r in zip(qs, results, strict=True)]
        runs[split] = (results, rel)
    base_ms = (time.perf_counter() - t) * 1000 / sum(len(r[0]) for r in runs.values())
    rep = Report("rerank_depth")

    def ranked(rel: np.ndarray, p: np.ndarray, base_sc: np.ndarray, d: int, w: float) -> np.ndarray:
        if d == 0:
            return np.arange(len(rel))
        s = p[:d].astype(np.float64)
        if w < 1:
            b = base_sc[:d]
            span = b.max() - b.min()
            s = w * s + (1 - w) * ((b - b.min()) / span if span > 0 else np.ones_like(b))
        return np.concatenate([np.argsort(-s, kind="stable"), np.arange(d, len(rel))]).astype(np.int64)

    def score(split: str, probs: list[np.ndarray], d: int, w: float) -> dict[int, float]:
        results, relevant = runs[split]
        hits = {k: 0 for k in KS}
        for r, rel, p in zip(results, relevant, probs, strict=True):
            order = ranked(rel, p, np.array([h.score for h in r.hits]), d, w)
            for k in KS:
                hits[k] += bool(rel[order[:k]].any())
        return {k: hits[k] / len(results) for k in KS}

    for path in args.rerankers.split(","):
        rr = Reranker(path)
        probs = {}
        for split, (results, _) in runs.items():
            t = time.perf_counter()
            probs[split] = [rr.score(r.query, [hit_input(h, sep) for h in r.hits]) for r in results]
            ms = (time.perf_counter() - t) * 1000 / len(results)
        chosen = None
        if "train" in runs:
            grid = [(d, w) for d in depths for w in mixes]
            chosen = max(grid, key=lambda dw: (score("train", probs["train"], *dw)[1], -dw[0]))
        for d in depths:
            for w in mixes if d else [1.0]:
                m = score("dev", probs["dev"], d, w)
                row = {"reranker": Path(path).name, "depth": d, "w": w, **{f"top{k}": round(100 * m[k], 1) for k in KS},
                       "rerank ms/q": round(ms * d / deepest, 1) if d else 0.0,
                       "chosen on train": "yes" if chosen == (d, w) else ""}
                if "train" in runs:
                    row["train top1"] = round(100 * score("train", probs["train"], d, w)[1], 1)
                rep.add(row, key=f"{Path(path).name}/{d}/{w}", result={f"top{k}": m[k] for k in KS})
    rep.print(f"{args.method} {params} on {len(dev)} SQuAD dev questions (base search {base_ms:.1f} ms/q)")
    write_json("rerank_depth", {**rep.to_dict(), "args": vars(args), "base_params": params, "base_ms": base_ms})
    return 0


if __name__ == "__main__":
    sys.exit(main())
