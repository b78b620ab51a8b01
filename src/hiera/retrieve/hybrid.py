"""Hybrid retrieval: BM25 and dense passage rankings fused (:mod:`hiera.fusion`).

``fusion="rrf"``: reciprocal-rank fusion, robust and scale-free.
``fusion="interp"``: each list min-max normalized within its top ``depth``,
then ``alpha · dense + (1 − alpha) · bm25``. Passage level fuses the top
``max(k, depth)`` of each list (default 100); document level the top
``max(k, doc_depth)`` (default 1000, enough passages to cover k documents),
then ranks each document by its best fused passage.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from hiera.fusion import Ranked, interpolate, minmax, rrf
from hiera.index.masked import bm25_strategy, vector_strategy
from hiera.index.select import top_documents, topk
from hiera.query import Allowed, Query, QueryBatch
from hiera.results import Hit, TraceStep, timed
from hiera.retrieve.base import BaseRetriever
from hiera.spec import Level


class HybridRetriever(BaseRetriever):
    name = "hybrid"
    filters = True

    def _filter_strategy(self, allowed: Allowed, params: dict[str, Any], level: Level) -> dict[str, Any]:
        return {"strategy": {"bm25": bm25_strategy(self.col.bm25_passages.size, allowed, "passage"),
                             "dense": vector_strategy(self.col.passage_faiss, allowed, "passage")}}

    def _prepare(self, queries: list[str], params: dict[str, Any]) -> QueryBatch:
        return self._query_vectors(queries, params)

    def _search(self, q: Query, k: int, level: Level, params: dict[str, Any], trace: list[TraceStep]) -> list[Hit]:
        def fuse(depth: int) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray]:
            (bpos, bsc), (dpos, dsc) = (self.col.passage_lists(q.text, q.qp, depth) if q.filter is None
                                        else self.col.passage_lists(q.text, q.qp, depth, q.filter))
            if params["fusion"] == "rrf":
                a, fused = rrf([Ranked(bpos, bsc), Ranked(dpos, dsc)])
            else:
                alpha = params["alpha"]
                a, fused = interpolate([Ranked(bpos, minmax(bsc)), Ranked(dpos, minmax(dsc))], [1 - alpha, alpha])
            return a, fused, bsc, dsc

        def fused_ranking(depth: int) -> tuple[np.ndarray, np.ndarray]:
            a, fused, _, _ = fuse(depth)
            order, _ = topk(fused, len(fused))
            return a.ids[order], fused[order]

        depth = max(k, params["doc_depth"] if level == "doc" else params["depth"])
        with timed(trace, "bm25+dense-passages+fusion", depth=depth, method=params["fusion"]) as step:
            if level == "doc":
                docs, docsc, best, step.detail["depth"] = top_documents(
                    fused_ranking, self.col.passage_doc, k, depth, len(self.col.passage_doc))
            else:
                a, fused, bsc, dsc = fuse(depth)
        if level == "doc":
            return self.doc_hits(docs, docsc, {"fusion": (docsc, np.arange(1, len(docs) + 1))}, best)
        sel, fsc = topk(fused, k)
        # raw scores per list for the explanation (0 and rank 0 where a list missed the passage)
        (brank, drank) = a.ranks[:, sel]
        bscore = np.where(brank > 0, bsc[np.maximum(brank - 1, 0)] if len(bsc) else 0.0, 0.0).astype(np.float32)
        dscore = np.where(drank > 0, dsc[np.maximum(drank - 1, 0)] if len(dsc) else 0.0, 0.0).astype(np.float32)
        stages = {"bm25": (bscore, brank), "dense": (dscore, drank)}
        return self.passage_hits(a.ids[sel], fsc, stages)
