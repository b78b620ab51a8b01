"""Flat dense retrieval over all passages: the DPR baseline."""

from __future__ import annotations

from typing import Any

import numpy as np

from hiera.index.dense import faiss_search
from hiera.index.masked import vector_search, vector_strategy
from hiera.index.select import ranks_of, top_documents
from hiera.query import Allowed, Query, QueryBatch
from hiera.results import Hit, TraceStep, timed
from hiera.retrieve.base import BaseRetriever
from hiera.spec import Level


class DenseRetriever(BaseRetriever):
    """FAISS search of the passage index; doc level = best passage per document."""

    name = "dense"
    filters = True

    def _filter_strategy(self, allowed: Allowed, params: dict[str, Any], level: Level) -> dict[str, Any]:
        return {"strategy": vector_strategy(self.col.passage_faiss, allowed, "passage")}

    def _prepare(self, queries: list[str], params: dict[str, Any]) -> QueryBatch:
        return self._query_vectors(queries, params)

    def _search(self, q: Query, k: int, level: Level, params: dict[str, Any], trace: list[TraceStep]) -> list[Hit]:
        def search(depth: int) -> tuple[np.ndarray, np.ndarray]:
            if q.filter is None:
                ids, sc = faiss_search(self.col.passage_faiss, q.qp, depth)
            else:
                ids, sc = vector_search(self.col.passage_faiss, lambda: self.col.passage_vectors, q.qp, depth,
                                        q.filter, "passage")
            keep = ids[0] >= 0
            return ids[0][keep], sc[0][keep]

        with timed(trace, "dense-passages", depth=k if level == "passage" else max(k, params["doc_depth"]),
                   index=self.col.faiss_types.get("passage")) as step:
            if level == "passage":
                pos, sc = search(k)
            else:
                docs, dsc, best, step.detail["depth"] = top_documents(
                    search, self.col.passage_doc, k, step.detail["depth"], len(self.col.passage_doc))
        if level == "passage":
            return self.passage_hits(pos, sc, {"passage": (sc, ranks_of(sc))})
        return self.doc_hits(docs, dsc, {"passage": (dsc, ranks_of(dsc))}, best)
