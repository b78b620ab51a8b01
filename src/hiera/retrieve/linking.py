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
5. **coverage**: a multi-hop question needs every part's evidence in the
   first ranks, and a plain score ranking lets one part crowd out the
   others. The second hop (a document reached only through the first one,
   source ``bridge``) shares few words with the question, so BM25 and the
   reranker bury it: if no passage of a bridge-linked document is among the
   top ``hop_slot``, the best-ranked one moves up to rank ``hop_slot``. Then
   each of the first ``subquestion_slots`` sub-questions gets a seat: its
   best passage (BM25 of the sub-question over the kept passages) moves up
   to rank 2, 3, … when it ranks below (a comparison's second entity, a
   bridge's filled second hop). 0 turns either off. Hits keep the scores of
   the ranks they hold (scores stay in rank order); a moved passage's own
   scores stay in its ``coarse`` and ``rerank`` stages, and the trace step
   ``coverage`` lists every move, or why none was needed.

Every hit carries ``link`` (its document's linking score and rank among
the linked documents), ``bm25`` (the coarse filter), ``coarse`` (the fused
coarse score) and ``rerank`` stages.
The trace has ``mentions`` (spans), ``entity-linking`` (candidates with
mention, lookup, match, similarity, prior, score), ``event-linking``,
``decomposition`` (shape, sub-questions, bridge, warnings),
``decomposition-linking``, ``linked-documents`` (each title with every
source that linked it), ``coarse-filter``, ``rerank`` and ``coverage``. ``hiera search
--retriever linking --explain`` prints it as a tree.

The same linked documents serve DHR as its ``linked`` document stage
(:class:`LinkedStage`, declared in :data:`hiera.spec.DOC_STAGES`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from hiera.collection import Collection
from hiera.fusion import by_max, mix
from hiera.index.select import concat_ranges, docs_from_passages, ranks_of, topk
from hiera.link.pipeline import LinkSettings, linker_for
from hiera.query import DOC, Query, QueryBatch
from hiera.results import Hit, TraceStep, timed
from hiera.retrieve.base import BaseRetriever
from hiera.score.docstage import DocStage
from hiera.spec import Level


class LinkedStage(DocStage):
    """DHR's ``linked`` document stage: the linking pipeline's documents (default settings), by fused score / best.

    Only linked documents score (``all`` gives the others 0): DHR then ranks the
    passages of the documents entity, event and decomposition linking chose.
    """

    name = "linked"
    vectors = frozenset({"qd"})

    def top(self, col: Collection, q: Query, k: int) -> tuple[np.ndarray, np.ndarray]:
        """The linked documents, best first; with a filter, only the allowed ones, divided by the best of them."""
        res = linker_for(col).link(q.text, qd=q.qd if q.has(DOC) else None)
        docs, scores = _allowed_links(res.docs, res.scores, q)
        return docs[:k], scores[:k]


def _allowed_links(docs: np.ndarray, scores: np.ndarray, q: Query) -> tuple[np.ndarray, np.ndarray]:
    """The linked documents a filter allows (all without one), their scores divided by the best allowed one's."""
    if q.filter is None:
        return docs, scores
    keep = q.filter.docs[np.asarray(docs, dtype=np.int64)]
    return docs[keep], by_max(np.asarray(scores, dtype=np.float32)[keep])


class LinkingRetriever(BaseRetriever):
    """Linked documents → BM25 coarse filter → cross-encoder (module docstring)."""

    name = "linking"
    filters = True  # linked documents outside the filter are dropped before the coarse filter

    def reranker(self, path: str | None) -> Any:
        """The :class:`~hiera.crossencoder.Reranker` at ``path`` (loaded once per retriever), or None."""
        from hiera.crossencoder import Reranker

        return self._load_dir("reranker", path, Reranker, "train one with hiera train-reranker")

    def _prepare(self, queries: list[str], params: dict[str, Any]) -> QueryBatch:
        if not self.col.has_dense:
            return QueryBatch(queries, params)
        return self._query_vectors(queries, params, "doc")

    def _search(self, q: Query, k: int, level: Level, params: dict[str, Any], trace: list[TraceStep]) -> list[Hit]:
        col, query = self.col, q.text
        reranker = self.reranker(params.get("reranker"))  # a bad directory fails before any work
        linked = linker_for(col).link(query, LinkSettings.from_params(params), q.qd if q.has(DOC) else None)
        trace.extend(linked.steps())
        ldocs, lscores = _allowed_links(linked.docs, linked.scores, q)
        if q.filter is not None:
            trace.append(TraceStep("filter-links", {"linked": len(linked.docs), "allowed": len(ldocs)}))
        if len(ldocs) == 0:
            trace.append(TraceStep("coarse-filter", {"passages": 0, "kept": 0, "note": "no linked documents: nothing to rank"}))
            return []
        link_rank = {int(d): i + 1 for i, d in enumerate(ldocs)}
        link_score = {int(d): float(s) for d, s in zip(ldocs, lscores, strict=True)}
        w = float(params["link_weight"])
        with timed(trace, "coarse-filter", coarse_depth=params["coarse_depth"]) as step:
            starts, ends = col.doc_offsets[ldocs], col.doc_offsets[ldocs + 1]
            cand = concat_ranges(starts, ends)
            if q.filter is not None:
                cand = cand[q.filter.passages[cand]]
            bm25 = col.bm25_passages.scores_at(query, cand)
            sel, bsc = topk(bm25, params["coarse_depth"])
            pos = cand[sel]
            lsc = np.array([link_score[int(d)] for d in col.passage_doc[pos]], np.float32)
            coarse = mix(lsc, by_max(bsc), w).astype(np.float32)
            corder = np.argsort(-coarse, kind="stable")
            step.detail.update(documents=len(ldocs), passages=len(cand), kept=len(pos), scorer="BM25 of the question",
                               order=f"(1 - {w:g}) * BM25/max + {w:g} * link score" if w > 0 else "BM25")
        cols = {"pos": pos[corder], "bsc": bsc[corder], "bm25_rank": ranks_of(bsc)[corder], "coarse": coarse[corder],
                "coarse_rank": np.arange(1, len(pos) + 1)}
        if reranker is None:
            trace.append(TraceStep("rerank", {"model": None, "note": "no reranker: the coarse order stands "
                                              "(pass --set reranker=DIR from hiera train-reranker)"}))
            cols["final"] = cols["coarse"]
        else:
            from hiera.crossencoder import hit_input

            with timed(trace, "rerank", model=reranker.name, threshold=reranker.threshold) as step:
                base = self.passage_hits(cols["pos"], cols["coarse"])
                sep = col.title_sep
                probs = reranker.score(query, [hit_input(h, sep) for h in base])
                mixed = reranker.combine(probs, cols["coarse"])
                order = np.argsort(-mixed, kind="stable")
                step.detail.update(scored=len(base), relevant=int((probs >= reranker.threshold).sum()),
                                   weight=reranker.weight)
            cols = {**{name: v[order] for name, v in cols.items()}, "final": mixed[order],
                    "rerank": probs[order], "rerank_rank": ranks_of(probs)[order]}
        with timed(trace, "coverage", hop_slot=params["hop_slot"], subquestion_slots=params["subquestion_slots"]) as step:
            subs = list(linked.per_text)[: int(params["subquestion_slots"])]
            best = [(t, col.bm25_passages.scores_at(t, cols["pos"])) for t in subs]
            ranked, moves, notes = coverage(col.passage_doc[cols["pos"]], linked.sources, int(params["hop_slot"]),
                                            [(t, int(np.argmax(b)) if len(b) and b.max() > 0 else None) for t, b in best])
            moved = col.passages_at(cols["pos"][np.array([m.pop("index") for m in moves], dtype=np.int64)])
            for m, p in zip(moves, moved, strict=True):
                m.update(passage_id=p.id, title=p.doc_title)
            step.detail.update(moves=moves, notes=notes)
            perm = np.asarray(ranked, dtype=np.int64)
            cols = {name: (v if name == "final" else v[perm]) for name, v in cols.items()}  # scores stay the ranks'
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
        return None, "hop slot off (hop_slot=0)"
    bridged = np.array([any(s.source == "bridge" for s in sources.get(int(d), ())) for d in docs], bool)
    if not bridged.any():
        return None, "no passage of a bridge-linked document to move"
    first = int(np.argmax(bridged))
    if first < slot:
        return None, f"a passage of a bridge-linked document is already at rank {first + 1}"
    return (first, slot - 1), f"the best passage of a bridge-linked document moved up from rank {first + 1}"


def coverage(
    docs: np.ndarray, sources: dict[int, list[Any]], hop: int, subs: list[tuple[str, int | None]]
) -> tuple[list[int], list[dict[str, Any]], list[str]]:
    """The coverage step of the module docstring over a ranked list of passages (``docs``: their documents).

    ``subs``: each sub-question with the list index of its best passage (None:
    no word in common with any). Returns the new order (list indices), the
    moves (``index``, ``why``, ``from_rank``, ``to_rank``; ranks as they
    were when the move was made) and notes on what did not move.
    """
    order = list(range(len(docs)))
    moves: list[dict[str, Any]] = []
    move, note = hop_slot(docs, sources, hop)
    if move is None:
        notes = [note]
    else:
        notes = []
        order.insert(move[1], order.pop(move[0]))
        moves.append({"index": move[0], "why": "bridge hop", "from_rank": move[0] + 1, "to_rank": move[1] + 1})
    for i, (text, j) in enumerate(subs):
        if j is None:
            notes.append(f"sub-question {text!r}: no kept passage shares a word with it")
            continue
        at, to = order.index(j), i + 1
        if at <= to:
            notes.append(f"sub-question {text!r}: its best passage is already at rank {at + 1}")
            continue
        order.insert(to, order.pop(at))
        moves.append({"index": j, "why": "sub-question", "text": text, "from_rank": at + 1, "to_rank": to + 1})
    return order, moves, notes
