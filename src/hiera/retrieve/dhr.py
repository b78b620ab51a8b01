"""Dense hierarchical retrieval (DHR) and its BM25 twin.

``dhr`` (serial): the document stage picks the top-k1 documents; the passage
encoder scores *all* their passages, gathered from the float16 matrix through
the offset table and scored with one matrix product; final score = passage
score + λ · document score.

``dhr-parallel``: every document and the top passages of the flat passage
index are scored independently and fused with the same formula.

``bm25-dhr``: the serial scheme with BM25 at both levels, each divided by the
query's best score so λ weighs comparable numbers.
"""

from __future__ import annotations

import time
from typing import Any, NamedTuple

import numpy as np

from hiera.index.dense import faiss_search
from hiera.index.select import concat_ranges, topk
from hiera.retrieve.base import BaseRetriever, _non_negative, _positive_int, ranks_of
from hiera.retrieve.docstage import HYBRID_ALPHA, check_doc_stage, needs_vectors, score_all_docs, score_docs
from hiera.retrieve.protocol import Hit, Level, TraceStep, timed


class Candidates(NamedTuple):
    """DHR's passage-stage input: the chosen documents and all their passages."""

    docs: np.ndarray  # document positions, best first
    doc_scores: np.ndarray  # normalized document-stage scores
    passages: np.ndarray  # passage positions of those documents, grouped by document
    passage_scores: np.ndarray  # passage-encoder cosine of each candidate
    per_doc: np.ndarray  # index into ``docs`` of each candidate passage


class _Hierarchical(BaseRetriever):
    param_spec = {
        "lam": (float, _non_negative, "must be a finite number >= 0"),
        "k1": (int, _positive_int, "must be a positive integer"),
        "doc_stage": (str, lambda v: True, "must be a document stage name"),
        "doc_alpha": (float, lambda v: 0.0 <= v <= 1.0, "must be a number in [0, 1]"),
    }

    def base_defaults(self) -> dict[str, Any]:
        d = self.col.manifest.defaults
        return {
            "lam": float(d.get("lambda", 1.0)),
            "k1": int(d.get("k1", 100)),
            "doc_stage": str(self.col.manifest.doc_stage.get("name", "summary")),
            "doc_alpha": float(self.col.manifest.doc_stage.get("alpha", HYBRID_ALPHA)),
        }

    def _check_params(self, params: dict[str, Any]) -> dict[str, Any]:
        out = super()._check_params(params)
        if "doc_stage" in out:
            check_doc_stage(out["doc_stage"])
        return out

    def _prepare(self, queries: list[str], params: dict[str, Any]) -> list[dict[str, Any]]:
        need = needs_vectors(params["doc_stage"]) | {"qp"}
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

    def candidates(self, query: str, ctx: dict[str, Any], k1: int, doc_stage: str) -> Candidates:
        """Document stage, then the passage encoder's score of every passage of those documents.

        Exposed so that tuning can re-rank the same candidates for many (λ, k1).
        """
        dpos, dsc = score_docs(self.col, doc_stage, query, ctx, k1)
        starts, ends = self.col.doc_offsets[dpos], self.col.doc_offsets[dpos + 1]
        cand = concat_ranges(starts, ends)
        pscore = self.col.passage_vectors[cand].astype(np.float32, copy=False) @ ctx["qp"]
        per_doc = np.repeat(np.arange(len(dpos)), ends - starts)
        return Candidates(dpos, dsc, cand, pscore, per_doc)

    def _search(self, query: str, k: int, level: Level, params: dict[str, Any], trace: list[TraceStep], ctx: dict[str, Any]) -> list[Hit]:
        lam, k1 = params["lam"], params["k1"]
        if level == "doc":
            # The document ranking is the document stage's; k1 only bounds the passage stage.
            with timed(trace, "doc-stage", stage=params["doc_stage"]):
                dpos, dsc = score_docs(self.col, params["doc_stage"], query, ctx, k)
            return self.doc_hits(dpos, dsc, {"doc": (dsc, np.arange(1, len(dpos) + 1))})
        with timed(trace, "doc-stage+gather", stage=params["doc_stage"], k1=k1) as step:
            c = self.candidates(query, ctx, k1, params["doc_stage"])
            step.detail.update(documents=len(c.docs), candidates=len(c.passages))
        with timed(trace, "passage-stage", lam=lam):
            final = c.passage_scores + lam * c.doc_scores[c.per_doc]
            sel, fsc = topk(final, k)
        drank = np.arange(1, len(c.docs) + 1)
        stages = {
            "doc": (c.doc_scores[c.per_doc[sel]], drank[c.per_doc[sel]]),
            "passage": (c.passage_scores[sel], ranks_of(c.passage_scores)[sel]),
        }
        return self.passage_hits(c.passages[sel], fsc, stages)


class DhrParallelRetriever(_Hierarchical):
    """Parallel DHR: all documents and the flat passage top list, fused."""

    name = "dhr-parallel"
    param_spec = {**_Hierarchical.param_spec, "depth": (int, _positive_int, "must be a positive integer")}

    def base_defaults(self) -> dict[str, Any]:
        return {**super().base_defaults(), "depth": 1000}

    def _search(self, query: str, k: int, level: Level, params: dict[str, Any], trace: list[TraceStep], ctx: dict[str, Any]) -> list[Hit]:
        col, lam = self.col, params["lam"]
        with timed(trace, "doc-stage", stage=params["doc_stage"], scope="all documents"):
            dall = score_all_docs(col, params["doc_stage"], query, ctx)
        if level == "doc":
            dpos, dsc = topk(dall, k)
            return self.doc_hits(dpos, dsc, {"doc": (dsc, np.arange(1, len(dpos) + 1))})
        with timed(trace, "passage-stage", depth=params["depth"], lam=lam):
            ids, psc = faiss_search(col.passage_faiss, ctx["qp"], max(k, params["depth"]))
            keep = ids[0] >= 0
            pos, psc = ids[0][keep], psc[0][keep]
            docs = col.passage_doc[pos]
            final = psc + lam * dall[docs]
            sel, fsc = topk(final, k)
        # the document's rank among all documents: the same for each of its passages,
        # and the rank the doc level reports (ranking dall[docs] ranked passages, not documents)
        drank = ranks_of(dall)[docs]
        stages = {"doc": (dall[docs][sel], drank[sel]), "passage": (psc[sel], ranks_of(psc)[sel])}
        return self.passage_hits(pos[sel], fsc, stages)


class Bm25DhrRetriever(BaseRetriever):
    """Hierarchical BM25: top-k1 documents by BM25, then BM25 over their passages."""

    name = "bm25-dhr"
    param_spec = {
        "lam": (float, _non_negative, "must be a finite number >= 0"),
        "k1": (int, _positive_int, "must be a positive integer"),
    }

    def base_defaults(self) -> dict[str, Any]:
        d = self.col.manifest.defaults
        return {"lam": float(d.get("bm25_lambda", 1.0)), "k1": int(d.get("k1", 100))}

    def _search(self, query: str, k: int, level: Level, params: dict[str, Any], trace: list[TraceStep], ctx: dict[str, Any]) -> list[Hit]:
        col, lam = self.col, params["lam"]
        with timed(trace, "doc-stage", stage="bm25", k1=params["k1"]):
            dpos, dsc = score_docs(col, "bm25", query, ctx, params["k1"])
        drank = np.arange(1, len(dpos) + 1)
        if level == "doc":
            return self.doc_hits(dpos[:k], dsc[:k], {"doc": (dsc[:k], drank[:k])})
        with timed(trace, "passage-stage", lam=lam) as step:
            starts, ends = col.doc_offsets[dpos], col.doc_offsets[dpos + 1]
            cand = concat_ranges(starts, ends)
            pscore = col.bm25_passages.scores(query)[cand]
            top = float(pscore.max()) if len(pscore) else 0.0
            pnorm = pscore / top if top > 0 else pscore
            per_doc = np.repeat(np.arange(len(dpos)), ends - starts)
            final = pnorm + lam * dsc[per_doc]
            sel, fsc = topk(final, k)
            step.detail["candidates"] = len(cand)
        stages = {"doc": (dsc[per_doc[sel]], drank[per_doc[sel]]), "passage": (pnorm[sel], ranks_of(pnorm)[sel])}
        return self.passage_hits(cand[sel], fsc, stages)
