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
3. **coarse order**: ``(1 − link_weight) · BM25/max + link_weight · link
   score``. BM25 of the question alone ignores *why* a document was linked;
   a document that several sources agree on (its reciprocal-rank-fused link
   score) is more likely a supporting one. ``link_weight=0`` is the BM25
   order;
4. **fine ranking**: a cross-encoder (``reranker``, a ``hiera
   train-reranker`` directory) orders them, interpolated with the coarse
   score by its calibrated weight; without one the coarse order stands (the
   "no rerank" ablation) and the trace says so;
5. **hop slot**: a multi-hop question needs its second hop, and that
   document (reached only through the first hop, source ``bridge``) shares
   few words with the question, so BM25 and the reranker bury it. If no
   passage of a bridge-linked document is among the top ``hop_slot``, the
   best-ranked one moves up to rank ``hop_slot`` (0: off). The trace step
   ``hop-slot`` says which passage moved, from where, or why none did.

Every hit carries ``link`` (its document's linking score and rank among
the linked documents), ``bm25`` (the coarse filter), ``coarse`` (the fused
coarse score) and ``rerank`` stages.
The trace has ``mentions`` (spans), ``entity-linking`` (candidates with
mention, lookup, match, similarity, prior, score), ``event-linking``,
``decomposition`` (shape, sub-questions, bridge, warnings),
``decomposition-linking``, ``linked-documents`` (each title with every
source that linked it), ``coarse-filter``, ``rerank`` and ``hop-slot``. ``hiera search
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
from hiera.retrieve.fusion import by_max, mix
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
        w = float(params["link_weight"])
        with timed(trace, "coarse-filter", coarse_depth=params["coarse_depth"]) as step:
            starts, ends = col.doc_offsets[linked.docs], col.doc_offsets[linked.docs + 1]
            cand = concat_ranges(starts, ends)
            bm25 = col.bm25_passages.scores(query)[cand]
            sel, bsc = topk(bm25, params["coarse_depth"])
            pos = cand[sel]
            lsc = np.array([link_score[int(d)] for d in col.passage_doc[pos]], np.float32)
            coarse = mix(lsc, by_max(bsc), w).astype(np.float32)
            corder = np.argsort(-coarse, kind="stable")
            step.detail.update(documents=len(linked.docs), passages=len(cand), kept=len(pos), scorer="BM25 of the question",
                               order=f"(1 - {w:g}) * BM25/max + {w:g} * link score" if w > 0 else "BM25")
        cols = {"pos": pos[corder], "bsc": bsc[corder], "bm25_rank": ranks_of(bsc)[corder], "coarse": coarse[corder],
                "coarse_rank": np.arange(1, len(pos) + 1)}
        if reranker is None:
            trace.append(TraceStep("rerank", {"model": None, "note": "no reranker: the coarse order stands "
                                              "(pass --set reranker=DIR from hiera train-reranker)"}))
            cols["final"] = cols["coarse"]
        else:
            from hiera.rerank import hit_input

            with timed(trace, "rerank", model=reranker.name, threshold=reranker.threshold) as step:
                base = self.passage_hits(cols["pos"], cols["coarse"])
                sep = col.store.title_sep
                probs = reranker.score(query, [hit_input(h, sep) for h in base])
                mixed = reranker.combine(probs, cols["coarse"])
                order = np.argsort(-mixed, kind="stable")
                step.detail.update(scored=len(base), relevant=int((probs >= reranker.threshold).sum()),
                                   weight=reranker.weight)
            cols = {**{name: v[order] for name, v in cols.items()}, "final": mixed[order],
                    "rerank": probs[order], "rerank_rank": ranks_of(probs)[order]}
        with timed(trace, "hop-slot", slot=params["hop_slot"]) as step:
            move, note = hop_slot(col.passage_doc[cols["pos"]], linked.sources, int(params["hop_slot"]))
            if move is None:
                step.detail["note"] = note
            else:
                src, dst = move
                p = col.passages_at(cols["pos"][src : src + 1])[0]
                step.detail.update(moved={"passage_id": p.id, "title": p.doc_title, "from_rank": src + 1, "to_rank": dst + 1},
                                   note=note)
                perm = np.r_[np.arange(dst), src, np.arange(dst, src), np.arange(src + 1, len(cols["pos"]))]
                final = cols["final"]
                cols = {name: v[perm] for name, v in cols.items()}
                # the moved passage takes the score of the rank it now holds: scores stay in rank order,
                # its own coarse and rerank scores stay in its stages
                cols["final"] = np.r_[final[: dst + 1], final[dst:src], final[src + 1 :]]
        pos, final = cols["pos"], np.asarray(cols["final"], np.float32)
        docs = col.passage_doc[pos]
        stages = {
            "link": (np.array([link_score[int(d)] for d in docs], np.float32), np.array([link_rank[int(d)] for d in docs])),
            "bm25": (cols["bsc"], cols["bm25_rank"]),
            "coarse": (cols["coarse"], cols["coarse_rank"]),
            **({"rerank": (cols["rerank"], cols["rerank_rank"])} if "rerank" in cols else {}),
        }
        if level == "doc":
            dpos, dsc, best = docs_from_passages(col.passage_doc, pos, np.asarray(final, np.float32), k)
            dl = np.array([link_score[int(d)] for d in dpos], np.float32)
            return self.doc_hits(dpos, dsc, {"link": (dl, np.array([link_rank[int(d)] for d in dpos])),
                                             "final": (dsc, np.arange(1, len(dpos) + 1))}, best)
        stages = {name: (v[0][:k], v[1][:k]) for name, v in stages.items()}
        return self.passage_hits(pos[:k], np.asarray(final[:k], np.float32), stages)


def hop_slot(docs: np.ndarray, sources: dict[int, list[Any]], slot: int) -> tuple[tuple[int, int] | None, str]:
    """((from, to) 0-based positions of the bridge-hop passage to move up, or None; why), for rank ``slot``."""
    if slot <= 0:
        return None, "off (hop_slot=0)"
    bridged = np.array([any(s.source == "bridge" for s in sources.get(int(d), ())) for d in docs], bool)
    if not bridged.any():
        return None, "no passage of a bridge-linked document to move"
    first = int(np.argmax(bridged))
    if first < slot:
        return None, f"a passage of a bridge-linked document is already at rank {first + 1}"
    return (first, slot - 1), f"the best passage of a bridge-linked document moved up from rank {first + 1}"
