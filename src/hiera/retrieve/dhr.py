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
declared in :mod:`hiera.spec`; the fused score is :func:`hiera.score.fusion.dhr_score`.
"""

from __future__ import annotations

import time
from typing import Any, NamedTuple

import numpy as np

from hiera.index.dense import faiss_search
from hiera.index.select import concat_ranges, ranks_of, topk
from hiera.results import Hit, TraceStep, timed
from hiera.retrieve.base import BaseRetriever
from hiera.retrieve.dhr_device import DeviceBatch, device_stages
from hiera.score.docstage import STAGES, stage
from hiera.score.fusion import by_max, dhr_score, mix
from hiera.spec import Level, resolve_doc_stage


class Candidates(NamedTuple):
    """DHR's passage-stage input: the chosen documents and all their passages."""

    docs: np.ndarray  # document positions, best first
    doc_scores: np.ndarray  # normalized document-stage scores
    passages: np.ndarray  # passage positions of those documents, grouped by document
    passage_scores: np.ndarray  # passage-encoder cosine of each candidate
    per_doc: np.ndarray  # index into ``docs`` of each candidate passage
    passage_bm25: np.ndarray | None = None  # BM25 score of each candidate (hybrid passage stage only)

    def passage_stage(self, passage_alpha: float, keep: np.ndarray | None = None) -> np.ndarray:
        """Passage-stage score: the cosine, or mixed with BM25 / the best BM25 among the kept candidates."""
        dense = self.passage_scores if keep is None else self.passage_scores[keep]
        if passage_alpha <= 0 or self.passage_bm25 is None:
            return dense
        bm25 = self.passage_bm25 if keep is None else self.passage_bm25[keep]
        return mix(by_max(bm25), dense, passage_alpha)

    def fused(self, lam: float, top_docs: int | None = None, passage_alpha: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
        """(candidate indices, DHR scores) of the passages of the first ``top_docs`` documents."""
        keep = np.arange(len(self.passages)) if top_docs is None else np.flatnonzero(self.per_doc < top_docs)
        return keep, dhr_score(self.passage_stage(passage_alpha, keep), self.doc_scores[self.per_doc[keep]], lam)


class _Hierarchical(BaseRetriever):
    def _check_params(self, params: dict[str, Any]) -> dict[str, Any]:
        out = super()._check_params(params)
        if "doc_stage" in out:  # "auto" → the best stage this build serves; a stage it cannot serve is refused
            out["doc_stage"] = resolve_doc_stage(out["doc_stage"], "bm25" in self.col.built, self.col.has_dense,
                                                 self.col.profile)
        return out

    def _prepare(self, queries: list[str], params: dict[str, Any]) -> list[dict[str, Any]]:
        need = stage(params["doc_stage"]).vectors | {"qp"}
        _ = (self.col.passage_encoder, self.col.doc_encoder)  # loaded before the clock starts
        t = time.perf_counter()
        vecs: dict[str, np.ndarray] = {}
        if "qp" in need:
            vecs["qp"] = self.col.passage_encoder.encode_query(queries)
        if "qd" in need:
            same = self.col.doc_encoder is self.col.passage_encoder and "qp" in vecs
            vecs["qd"] = vecs["qp"] if same else self.col.doc_encoder.encode_query(queries)
        ms = (time.perf_counter() - t) * 1000 / len(queries)
        extra = {"encode_ms": ms, "doc_alpha": params["doc_alpha"]}
        return [{**{k: v[i] for k, v in vecs.items()}, **extra} for i in range(len(queries))]


class DhrRetriever(_Hierarchical):
    """Serial DHR: documents first, then only their passages."""

    name = "dhr"

    def __init__(self, collection: Any, **defaults: Any) -> None:
        # the declared hybrid passage stage needs BM25: a dense-only build gets the paper's dense-only stage
        # (a passage_alpha set explicitly, here or in the build, is kept and checked as given)
        if "bm25" not in collection.built and "passage_alpha" not in collection.method_defaults(self.name):
            defaults = {"passage_alpha": 0.0, **defaults}
        super().__init__(collection, **defaults)

    def _prepare(self, queries: list[str], params: dict[str, Any]) -> list[dict[str, Any]]:
        """With a torch search device, the batch's passage stages run there together (:mod:`hiera.retrieve.dhr_device`)."""
        contexts = super()._prepare(queries, params)
        if getattr(self.col, "device_passage_stage", None) is not None:
            batch = DeviceBatch(self.col, queries, contexts, params)
            for i, ctx in enumerate(contexts):
                ctx["device_batch"] = (batch, i)
        return contexts

    def candidates(
        self, query: str, ctx: dict[str, Any], top_docs: int, doc_stage: str, with_bm25: bool = False
    ) -> Candidates:
        """Document stage, then the passage encoder's score (and BM25's) of every passage of those documents.

        Exposed so that tuning can re-rank the same candidates for many (λ, top_docs, passage_alpha).
        """
        dpos, dsc = stage(doc_stage).top(self.col, query, ctx, min(top_docs, self.col.n_docs))
        starts, ends = self.col.doc_offsets[dpos], self.col.doc_offsets[dpos + 1]
        cand = concat_ranges(starts, ends)
        pscore = self.col.passage_scores(cand, ctx["qp"])
        per_doc = np.repeat(np.arange(len(dpos)), ends - starts)
        bm25 = self.col.passage_bm25_scores(cand, query) if with_bm25 else None
        return Candidates(dpos, dsc, cand, pscore, per_doc, bm25)

    def _search(self, query: str, k: int, level: Level, params: dict[str, Any], trace: list[TraceStep], ctx: dict[str, Any]) -> list[Hit]:
        lam, top_docs = params["lam"], params["top_docs"]
        if level == "doc":
            # The document ranking is the document stage's; top_docs only bounds the passage stage.
            with timed(trace, "doc-stage", stage=params["doc_stage"]):
                dpos, dsc = stage(params["doc_stage"]).top(self.col, query, ctx, min(k, self.col.n_docs))
            return self.doc_hits(dpos, dsc, {"doc": (dsc, np.arange(1, len(dpos) + 1))})
        pa = params["passage_alpha"]
        if "device_batch" in ctx:
            batch, i = ctx["device_batch"]
            r = batch.get(i, k)
            trace.append(TraceStep("doc-stage+gather", {"stage": params["doc_stage"], "top_docs": top_docs,
                                                        "documents": batch.documents[i], "candidates": r.candidates,
                                                        "device": self.col.search_device}, batch.doc_ms))
            trace.append(TraceStep("passage-stage", {"lam": lam, "passage_alpha": pa, "batched": len(batch.queries)},
                                   batch.passage_ms))
            return self.passage_hits(r.positions, r.scores, device_stages(r, pa > 0))
        with timed(trace, "doc-stage+gather", stage=params["doc_stage"], top_docs=top_docs) as step:
            c = self.candidates(query, ctx, top_docs, params["doc_stage"], with_bm25=pa > 0)
            step.detail.update(documents=len(c.docs), candidates=len(c.passages))
        with timed(trace, "passage-stage", lam=lam, passage_alpha=pa):
            _, final = c.fused(lam, passage_alpha=pa)
            sel, fsc = topk(final, k)
        drank = np.arange(1, len(c.docs) + 1)
        # score = passage + λ · doc, exactly; with the hybrid passage stage, "passage" is
        # α · bm25 / best + (1 − α) · dense, and both parts are shown
        pstage = c.passage_stage(pa)
        stages = {
            "doc": (c.doc_scores[c.per_doc[sel]], drank[c.per_doc[sel]]),
            "passage": (pstage[sel], ranks_of(pstage)[sel]),
        }
        if c.passage_bm25 is not None and pa > 0:
            stages["dense"] = (c.passage_scores[sel], ranks_of(c.passage_scores)[sel])
            stages["bm25"] = (c.passage_bm25[sel], ranks_of(c.passage_bm25)[sel])
        return self.passage_hits(c.passages[sel], fsc, stages)


class DhrParallelRetriever(_Hierarchical):
    """Parallel DHR: all documents and the flat passage top list, fused."""

    name = "dhr-parallel"

    def _search(self, query: str, k: int, level: Level, params: dict[str, Any], trace: list[TraceStep], ctx: dict[str, Any]) -> list[Hit]:
        col, lam = self.col, params["lam"]
        with timed(trace, "doc-stage", stage=params["doc_stage"], scope="all documents"):
            dall = stage(params["doc_stage"]).all(col, query, ctx)
        if level == "doc":
            dpos, dsc = topk(dall, k)
            return self.doc_hits(dpos, dsc, {"doc": (dsc, np.arange(1, len(dpos) + 1))})
        with timed(trace, "passage-stage", depth=params["depth"], lam=lam):
            ids, psc = faiss_search(col.passage_faiss, ctx["qp"], max(k, params["depth"]))
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


class Bm25DhrRetriever(BaseRetriever):
    """Hierarchical BM25: top documents by BM25, then BM25 over their passages."""

    name = "bm25-dhr"

    def _search(self, query: str, k: int, level: Level, params: dict[str, Any], trace: list[TraceStep], ctx: dict[str, Any]) -> list[Hit]:
        col, lam, top_docs = self.col, params["lam"], params["top_docs"]
        with timed(trace, "doc-stage", stage="bm25", top_docs=top_docs):
            dpos, dsc = STAGES["bm25"].top(col, query, ctx, min(top_docs, col.n_docs))
        drank = np.arange(1, len(dpos) + 1)
        if level == "doc":
            return self.doc_hits(dpos[:k], dsc[:k], {"doc": (dsc[:k], drank[:k])})
        with timed(trace, "passage-stage", lam=lam) as step:
            starts, ends = col.doc_offsets[dpos], col.doc_offsets[dpos + 1]
            cand = concat_ranges(starts, ends)
            pnorm = by_max(col.bm25_passages.scores_at(query, cand))
            per_doc = np.repeat(np.arange(len(dpos)), ends - starts)
            final = dhr_score(pnorm, dsc[per_doc], lam)
            sel, fsc = topk(final, k)
            step.detail["candidates"] = len(cand)
        stages = {"doc": (dsc[per_doc[sel]], drank[per_doc[sel]]), "passage": (pnorm[sel], ranks_of(pnorm)[sel])}
        return self.passage_hits(cand[sel], fsc, stages)

