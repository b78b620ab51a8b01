"""Hybrid retrieval: BM25 and dense passage rankings fused.

``fusion="rrf"``: reciprocal-rank fusion, Σ 1 / (60 + rank), robust and
scale-free. ``fusion="interp"``: min-max normalize each list's scores within
its top ``depth`` and interpolate, ``alpha · dense + (1 − alpha) · bm25``; a
passage missing from one list scores 0 there.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from hiera.errors import BadInputError
from hiera.index.dense import faiss_search
from hiera.index.select import topk
from hiera.retrieve.base import BaseRetriever, _positive_int, docs_from_passages
from hiera.retrieve.protocol import Hit, Level, TraceStep, timed

FUSIONS = ("rrf", "interp")
RRF_K = 60


def _fusion(v: Any) -> str:
    if v not in FUSIONS:
        raise ValueError(v)
    return str(v)


def _minmax(x: np.ndarray) -> np.ndarray:
    if len(x) == 0:
        return x
    lo, hi = float(x.min()), float(x.max())
    return (x - lo) / (hi - lo) if hi > lo else np.ones_like(x)


def _gather(values: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """``values[idx]`` with 0 where ``idx`` is -1 (absent from that list).

    ``np.where(idx >= 0, values[idx], 0)`` would index an empty list (a query
    BM25 knows no word of) with -1 and fail.
    """
    out = np.zeros(len(idx), dtype=np.float32)
    ok = idx >= 0
    out[ok] = values[idx[ok]]
    return out


class HybridRetriever(BaseRetriever):
    name = "hybrid"
    param_spec = {
        "fusion": (_fusion, lambda v: True, f"must be one of {FUSIONS}"),
        "alpha": (float, lambda v: 0.0 <= v <= 1.0, "must be in [0, 1]"),
        "depth": (int, _positive_int, "must be a positive integer"),
    }

    def base_defaults(self) -> dict[str, Any]:
        return {"fusion": "rrf", "alpha": 0.5, "depth": 1000}

    def _prepare(self, queries: list[str], params: dict[str, Any]) -> list[dict[str, Any]]:
        return self._passage_query_vectors(queries)

    def _search(self, query: str, k: int, level: Level, params: dict[str, Any], trace: list[TraceStep], ctx: dict[str, Any]) -> list[Hit]:
        depth = max(k, params["depth"]) if level == "doc" else max(k, min(params["depth"], 100))
        with timed(trace, "bm25-passages", depth=depth):
            bpos, bsc = self.col.bm25_passages.search(query, depth)
        with timed(trace, "dense-passages", depth=depth):
            ids, dsc = faiss_search(self.col.passage_faiss, ctx["qp"], depth)
            keep = ids[0] >= 0
            dpos, dsc = ids[0][keep], dsc[0][keep]
        with timed(trace, "fusion", method=params["fusion"]):
            cand = np.unique(np.concatenate([bpos, dpos]))
            bmap = dict(zip(bpos.tolist(), range(len(bpos)), strict=True))
            dmap = dict(zip(dpos.tolist(), range(len(dpos)), strict=True))
            bi = np.array([bmap.get(int(c), -1) for c in cand], dtype=np.int64)
            di = np.array([dmap.get(int(c), -1) for c in cand], dtype=np.int64)
            if params["fusion"] == "rrf":
                fused = np.where(bi >= 0, 1.0 / (RRF_K + bi + 1), 0.0) + np.where(di >= 0, 1.0 / (RRF_K + di + 1), 0.0)
            elif params["fusion"] == "interp":
                bn, dn = _minmax(bsc), _minmax(dsc)
                a = params["alpha"]
                fused = a * _gather(dn, di) + (1 - a) * _gather(bn, bi)
            else:  # pragma: no cover - guarded by the parameter check
                raise BadInputError(f"unknown fusion {params['fusion']!r}")
            fused = fused.astype(np.float32)
        bscore = _gather(bsc, bi)
        dscore = _gather(dsc, di)
        brank = np.where(bi >= 0, bi + 1, 0)
        drank = np.where(di >= 0, di + 1, 0)
        if level == "doc":
            order, _ = topk(fused, len(fused))
            docs, docsc, best = docs_from_passages(self.col.passage_doc, cand[order], fused[order], k)
            return self.doc_hits(docs, docsc, {"fusion": (docsc, np.arange(1, len(docs) + 1))}, best)
        sel, fsc = topk(fused, k)
        stages = {"bm25": (bscore[sel], brank[sel]), "dense": (dscore[sel], drank[sel])}
        return self.passage_hits(cand[sel], fsc, stages)
