"""Dense hierarchical retrieval (DHR) and its BM25 twin.

``dhr`` (serial): the document stage picks the top ``top_docs`` documents; the passage
encoder scores *all* their passages, gathered from the float16 matrix through
the offset table and scored with one matrix product; final score = passage
score + λ · document score.

``dhr-parallel``: every document and the top passages of the flat passage
index are scored independently and fused with the same formula.

``bm25-dhr``: the serial scheme with BM25 at both levels, each divided by the
query's best score so λ weighs comparable numbers.

Parameters (``lam``, ``top_docs``, ``doc_stage``, ``doc_alpha``, ``depth``) are
declared in :mod:`hiera.spec`. Both serial methods run their passage stage
through the collection's one primitive, ``Collection.passage_stage``
(:mod:`hiera.index.passage_stage`: numpy on the host, torch on a GPU, the
shards' scores on a sharded build), for a whole batch of queries at once; the
fused score is :func:`hiera.fusion.dhr_score`.

With a filter (``QueryBatch.filter``) the document stage searches only the
allowed documents and the passage stage keeps only the allowed passages of
the documents it gets, so a selective filter makes both stages cheaper.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from hiera.errors import BadInputError
from hiera.fusion import dhr_score
from hiera.index.dense import faiss_search
from hiera.index.masked import vector_search
from hiera.index.passage_stage import PassageSpec, StageResult
from hiera.index.select import ranks_of, topk
from hiera.query import PASSAGE, Allowed, Query, QueryBatch
from hiera.results import Hit, TraceStep, timed
from hiera.retrieve.base import BaseRetriever, Found
from hiera.score.docstage import stage
from hiera.spec import Level, resolve_doc_stage


def _filter_stage(name: str, allowed: Allowed | None) -> None:
    if allowed is not None and not stage(name).filters:
        raise BadInputError(f"the {name!r} document stage cannot search with a filter; pick another --set doc_stage")


class _Serial(BaseRetriever):
    """The serial scheme: a document stage, then the passage-stage primitive for the whole batch."""

    _with_dense = True  # the passage stage's dense scores (hierarchical BM25 has none)
    filters = True
    uses_passage_stage = True

    def _filter_strategy(self, allowed: Allowed, params: dict[str, Any], level: Level) -> dict[str, Any]:
        name = self._doc_stage(params)
        _filter_stage(name, allowed)
        return {"strategy": f"{name} document stage over the allowed documents"
                            + (", passage stage over their allowed passages" if level == "passage" else "")}

    def _doc_stage(self, params: dict[str, Any]) -> str:
        return params["doc_stage"]

    def _passage_alpha(self, params: dict[str, Any]) -> float:
        return float(params["passage_alpha"])

    def _search(self, q: Query, k: int, level: Level, params: dict[str, Any], trace: list[TraceStep]) -> list[Hit]:
        """Document level: the document stage's ranking (``top_docs`` only bounds the passage stage)."""
        name = self._doc_stage(params)
        _filter_stage(name, q.filter)
        with timed(trace, "doc-stage", stage=name):
            dpos, dsc = stage(name).top(self.col, q, min(k, self.col.n_docs))
        return self.doc_hits(dpos, dsc, {"doc": (dsc, np.arange(1, len(dpos) + 1))})

    def _search_batch(
        self, batch: QueryBatch, k: int, level: Level, params: dict[str, Any], traces: list[list[TraceStep]]
    ) -> list[list[Hit] | Found]:
        if level == "doc":
            return super()._search_batch(batch, k, level, params, traces)
        col, lam, top_docs = self.col, params["lam"], params["top_docs"]
        name, pa = self._doc_stage(params), self._passage_alpha(params)
        t = time.perf_counter()
        # a dense document stage searched on the torch device keeps its documents there (the hybrid passage
        # stage needs them on the host, where BM25 is)
        docs = stage(name).top_batch(col, batch, min(top_docs, col.n_docs), on_device=pa == 0)
        t2 = time.perf_counter()
        results = col.passage_stage(batch, docs, PassageSpec(lam, pa, k, with_dense=self._with_dense))
        n = max(1, len(batch))
        doc_ms, passage_ms = (t2 - t) * 1000 / n, (time.perf_counter() - t2) * 1000 / n
        out: list[list[Hit] | Found] = []
        # a device search handed over unrun is run by the passage stage (in its graph): timed there
        deferred = {"run": "inside the passage stage"} if docs.search is not None else {}
        for r, trace in zip(results, traces, strict=True):
            trace.append(TraceStep("doc-stage", {"stage": name, "top_docs": top_docs, "documents": r.documents,
                                                 **deferred}, doc_ms))
            trace.append(TraceStep("passage-stage", {"lam": lam, "passage_alpha": pa, "candidates": r.candidates,
                                                     "backend": col.passage_backend, "batched": len(batch),
                                                     **({"with": "doc-stage"} if deferred else {})},
                                   passage_ms))
            out.append(self.passage_hits(r.positions, r.scores, r.stages()))
        return out


class _Hierarchical(BaseRetriever):
    def _check_params(self, params: dict[str, Any]) -> dict[str, Any]:
        out = super()._check_params(params)
        if "doc_stage" in out:  # "auto" → the best stage this build serves; a stage it cannot serve is refused
            out["doc_stage"] = resolve_doc_stage(out["doc_stage"], "bm25" in self.col.built, self.col.has_dense,
                                                 self.col.profile)
        return out

    def _prepare(self, queries: list[str], params: dict[str, Any]) -> QueryBatch:
        need = stage(params["doc_stage"]).vectors | {PASSAGE}
        _ = (self.col.passage_encoder, self.col.doc_encoder)  # loaded before the clock starts
        t = time.perf_counter()
        vecs: dict[str, np.ndarray] = {}
        if "qp" in need:
            vecs["qp"] = self.col.passage_encoder.encode_query(queries)
        if "qd" in need:
            same = self.col.doc_encoder is self.col.passage_encoder and "qp" in vecs
            vecs["qd"] = vecs["qp"] if same else self.col.doc_encoder.encode_query(queries)
        ms = (time.perf_counter() - t) * 1000 / len(queries)
        return QueryBatch(queries, params, vecs, ms)


class DhrRetriever(_Serial, _Hierarchical):
    """Serial DHR: documents first, then only their passages."""

    name = "dhr"

    def __init__(self, collection: Any, **defaults: Any) -> None:
        # the declared hybrid passage stage needs BM25: a dense-only build gets the paper's dense-only stage
        # (a passage_alpha set explicitly, here or in the build, is kept and checked as given)
        if "bm25" not in collection.built and "passage_alpha" not in collection.method_defaults(self.name):
            defaults = {"passage_alpha": 0.0, **defaults}
        super().__init__(collection, **defaults)

    def candidates(self, batch: QueryBatch, top_docs: int, with_bm25: bool = False) -> list[StageResult]:
        """Every passage of each query's top ``top_docs`` documents, unfused, in candidate order, with the dense
        score (and BM25's): what ``hiera tune`` re-fuses for many (λ, top_docs, passage_alpha)."""
        docs = stage(batch.params["doc_stage"]).top_batch(self.col, batch, min(top_docs, self.col.n_docs))
        return self.col.passage_stage(batch, docs, PassageSpec(0.0, 0.5 if with_bm25 else 0.0, None))


class DhrParallelRetriever(_Hierarchical):
    """Parallel DHR: all documents and the flat passage top list, fused."""

    name = "dhr-parallel"
    filters = True

    def _filter_strategy(self, allowed: Allowed, params: dict[str, Any], level: Level) -> dict[str, Any]:
        _filter_stage(params["doc_stage"], allowed)
        return {"strategy": "allowed documents scored, allowed passages searched"}

    def _search(self, q: Query, k: int, level: Level, params: dict[str, Any], trace: list[TraceStep]) -> list[Hit]:
        col, lam, allowed = self.col, params["lam"], q.filter
        _filter_stage(params["doc_stage"], allowed)
        with timed(trace, "doc-stage", stage=params["doc_stage"], scope="all documents"):
            dall = stage(params["doc_stage"]).all(col, q)
            if allowed is not None:  # disallowed documents rank below every allowed one
                dall = np.where(allowed.docs, dall, np.float32(-np.inf)).astype(np.float32)
        if level == "doc":
            rows = np.arange(len(dall)) if allowed is None else allowed.doc_positions
            idx, dsc = topk(dall[rows], k)
            dpos = rows[idx]
            return self.doc_hits(dpos, dsc, {"doc": (dsc, np.arange(1, len(dpos) + 1))})
        with timed(trace, "passage-stage", depth=params["depth"], lam=lam):
            if allowed is None:
                ids, psc = faiss_search(col.passage_faiss, q.qp, max(k, params["depth"]))
            else:
                ids, psc = vector_search(col.passage_faiss, lambda: col.passage_vectors, q.qp,
                                         max(k, params["depth"]), allowed, "passage")
            keep = ids[0] >= 0
            pos, psc = ids[0][keep], psc[0][keep]
            docs = col.passage_doc[pos]
            final = dhr_score(psc, dall[docs], lam)
            sel, fsc = topk(final, k)
        # the document's rank among all documents: the same for each of its passages,
        # and the rank the doc level reports (ranking dall[docs] ranked passages, not documents)
        drank = ranks_of(dall)[docs]
        stages = {"doc": (dall[docs][sel], drank[sel]), "passage": (psc[sel], ranks_of(psc)[sel])}
        return self.passage_hits(pos[sel], fsc, stages)


class Bm25DhrRetriever(_Serial):
    """Hierarchical BM25: top documents by BM25, then BM25 over their passages (the passage stage with α = 1)."""

    name = "bm25-dhr"
    _with_dense = False
    uses_dense = False

    def _doc_stage(self, params: dict[str, Any]) -> str:
        return "bm25"

    def _passage_alpha(self, params: dict[str, Any]) -> float:
        return 1.0
