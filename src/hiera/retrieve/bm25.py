"""BM25 retrievers: ``bm25`` over titled passages, ``bm25-doc`` over documents."""

from __future__ import annotations

from typing import Any

import numpy as np

from hiera.index.masked import bm25_strategy, bm25_top
from hiera.index.select import ranks_of, top_documents
from hiera.query import Allowed, Query
from hiera.results import Hit, TraceStep, timed
from hiera.retrieve.base import BaseRetriever
from hiera.spec import Level


class Bm25Retriever(BaseRetriever):
    """Flat BM25 over passages (passage title included); doc level = best passage."""

    name = "bm25"
    filters = True
    uses_dense = False

    def _filter_strategy(self, allowed: Allowed, params: dict[str, Any], level: Level) -> dict[str, Any]:
        return {"strategy": bm25_strategy(self.col.bm25_passages.size, allowed, "passage")}

    def _search(self, q: Query, k: int, level: Level, params: dict[str, Any], trace: list[TraceStep]) -> list[Hit]:
        def search(depth: int) -> tuple[np.ndarray, np.ndarray]:
            if q.filter is None:
                return self.col.bm25_passages.search(q.text, depth)
            return bm25_top(self.col.bm25_passages, q.text, depth, q.filter, "passage")

        with timed(trace, "bm25-passages", depth=k if level == "passage" else max(k, params["doc_depth"])) as step:
            if level == "passage":
                pos, sc = search(k)
                step.detail["found"] = len(pos)
            else:
                docs, dsc, best, step.detail["depth"] = top_documents(
                    search, self.col.passage_doc, k, step.detail["depth"], len(self.col.passage_doc))
                step.detail["documents"] = len(docs)
        if level == "passage":
            return self.passage_hits(pos, sc, {"bm25": (sc, ranks_of(sc))})
        return self.doc_hits(docs, dsc, {"bm25": (dsc, ranks_of(dsc))}, best)


class Bm25DocRetriever(BaseRetriever):
    """BM25 over whole documents (full text or summary, as built): document level only."""

    name = "bm25-doc"
    filters = True
    uses_dense = False

    def _filter_strategy(self, allowed: Allowed, params: dict[str, Any], level: Level) -> dict[str, Any]:
        return {"strategy": bm25_strategy(self.col.bm25_docs.size, allowed, "doc")}

    def _search(self, q: Query, k: int, level: Level, params: dict[str, Any], trace: list[TraceStep]) -> list[Hit]:
        with timed(trace, "bm25-docs", k=k) as step:
            if q.filter is None:
                pos, sc = self.col.bm25_docs.search(q.text, k)
            else:
                pos, sc = bm25_top(self.col.bm25_docs, q.text, k, q.filter, "doc")
            step.detail["found"] = len(pos)
        return self.doc_hits(pos, sc, {"doc": (sc, ranks_of(sc))})
