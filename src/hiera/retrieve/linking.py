"""``linking``: the interpretable pipeline of Yu, Zhou & Roth ("Building Interpretable and Reliable Open
Information Retriever for New Domains Overnight"): link → coarse filter → cross-encoder, every step traced.

1. **title generation** (:mod:`hiera.link.pipeline`): entity linking of the
   question's mentions (``entity_titles`` documents), event linking of the
   question against document summaries (``event_titles``), decomposition
   (``decomposer``: ``rules`` over the dependency parse, ``none``, or
   ``endpoint`` = an OpenAI-compatible chat-completions model at
   ``decomposer_url``) and event linking of every sub-question or sentence
   (``decomposition_titles`` each). The union is the candidate document set;
2. **coarse filter**: every passage of those documents (≤ 100 words each, as
   the collection was split), the top ``coarse_depth`` by BM25 for the
   question (the paper: 200 "are almost the same as document-level
   coverage");
3. **fine ranking**: a cross-encoder (``reranker``, a ``hiera
   train-reranker`` directory) orders them; without one the coarse BM25
   order stands (the "no rerank" ablation) and the trace says so.

Every hit carries ``link`` (its document's linking score and rank among
the linked documents), ``bm25`` (the coarse filter) and ``rerank`` stages.
The trace has ``mentions`` (spans), ``entity-linking`` (candidates with
mention, lookup, match, similarity, prior, score), ``event-linking``,
``decomposition`` (shape, sub-questions, bridge, warnings),
``decomposition-linking``, ``linked-documents`` (each title with every
source that linked it), ``coarse-filter`` and ``rerank``. ``hiera search
--retriever linking --explain`` prints it as a tree.

The same linked documents serve DHR as its ``linked`` document stage
(:class:`hiera.retrieve.docstage.Linked`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from hiera.index.select import concat_ranges, topk
from hiera.link.pipeline import LinkSettings, linker_for
from hiera.retrieve.base import BaseRetriever, docs_from_passages, ranks_of
from hiera.retrieve.protocol import Hit, Level, TraceStep, timed


class LinkingRetriever(BaseRetriever):
    """Linked documents → BM25 coarse filter → cross-encoder (module docstring)."""

    name = "linking"

    def reranker(self, path: str | None) -> Any:
        """The :class:`~hiera.rerank.Reranker` at ``path`` (loaded once per retriever), or None."""
        from hiera.rerank import Reranker

        return self._load_dir("reranker", path, Reranker, "train one with hiera train-reranker")

    def _prepare(self, queries: list[str], params: dict[str, Any]) -> list[dict[str, Any]]:
        if not self.col.has_dense:
            return [{} for _ in queries]
        return self._query_vectors(queries, "doc")

    def _search(
        self, query: str, k: int, level: Level, params: dict[str, Any], trace: list[TraceStep], ctx: dict[str, Any]
    ) -> list[Hit]:
        col = self.col
        reranker = self.reranker(params.get("reranker"))  # a bad directory fails before any work
        linked = linker_for(col).link(query, LinkSettings.from_params(params), ctx.get("qd"))
        trace.extend(linked.steps())
        if len(linked.docs) == 0:
            trace.append(TraceStep("coarse-filter", {"passages": 0, "kept": 0, "note": "no linked documents: nothing to rank"}))
            return []
        link_rank = {int(d): i + 1 for i, d in enumerate(linked.docs)}
        link_score = {int(d): float(s) for d, s in zip(linked.docs, linked.scores, strict=True)}
        with timed(trace, "coarse-filter", coarse_depth=params["coarse_depth"]) as step:
            starts, ends = col.doc_offsets[linked.docs], col.doc_offsets[linked.docs + 1]
            cand = concat_ranges(starts, ends)
            bm25 = col.bm25_passages.scores(query)[cand]
            sel, bsc = topk(bm25, params["coarse_depth"])
            pos = cand[sel]
            step.detail.update(documents=len(linked.docs), passages=len(cand), kept=len(pos), scorer="BM25 of the question")
        bm25_rank = ranks_of(bsc)
        if reranker is None:
            trace.append(TraceStep("rerank", {"model": None, "note": "no reranker: the coarse BM25 order stands "
                                              "(pass --set reranker=DIR from hiera train-reranker)"}))
            order, final = np.arange(len(pos)), bsc
            stages_extra: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        else:
            from hiera.rerank import hit_input

            with timed(trace, "rerank", model=reranker.name, threshold=reranker.threshold) as step:
                base = self.passage_hits(pos, bsc)
                sep = col.store.title_sep
                probs = reranker.score(query, [hit_input(h, sep) for h in base])
                mixed = reranker.combine(probs, bsc)
                order = np.argsort(-mixed, kind="stable")
                final = mixed[order]
                step.detail.update(scored=len(base), relevant=int((probs >= reranker.threshold).sum()),
                                   weight=reranker.weight)
            stages_extra = {"rerank": (probs[order], ranks_of(probs)[order])}
        pos, bsc, bm25_rank = pos[order], bsc[order], bm25_rank[order]
        docs = col.passage_doc[pos]
        stages = {
            "link": (np.array([link_score[int(d)] for d in docs], np.float32), np.array([link_rank[int(d)] for d in docs])),
            "bm25": (bsc, bm25_rank),
            **stages_extra,
        }
        if level == "doc":
            dpos, dsc, best = docs_from_passages(col.passage_doc, pos, np.asarray(final, np.float32), k)
            dl = np.array([link_score[int(d)] for d in dpos], np.float32)
            return self.doc_hits(dpos, dsc, {"link": (dl, np.array([link_rank[int(d)] for d in dpos])),
                                             "final": (dsc, np.arange(1, len(dpos) + 1))}, best)
        stages = {name: (v[0][:k], v[1][:k]) for name, v in stages.items()}
        return self.passage_hits(pos[:k], np.asarray(final[:k], np.float32), stages)
