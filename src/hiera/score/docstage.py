"""Document-stage scorers for hierarchical retrieval.

DHR's first stage picks the top ``top_docs`` documents; everything after it can only
re-order their passages, so this stage bounds the whole method. Scorers:

``summary``
    the paper: the document encoder over title + lead + table of contents,
    searched in the FAISS document index. Score: cosine.
``mean``
    passage-aggregate vector: the normalized mean of a document's passage
    vectors, in the passage encoder's space, searched in its own FAISS index
    (same factory as the document index). Score: cosine.
``bm25``
    BM25 over whole documents (or summaries, as built). Score divided by the
    query's best document score, so it lies in (0, 1].
``passage-max`` / ``bm25-passage-max``
    a document scores as its best passage (dense / BM25): the multi-vector
    limit of aggregate documents. Dense: cosine; BM25: divided by the best.
``hybrid-max``
    interpolation of the two passage-max stages:
    ``α · BM25 passage-max / best + (1 − α) · dense passage-max cosine``, each
    over the top passages of its own index (a document one list misses gets
    that list's lowest score: an upper bound of what it would have had; 0
    from a BM25 list that holds every matching passage, since it matched
    none). Each list is the top ``max(200, 4 · top_docs)`` passages, searched
    deeper while they hold fewer than ``top_docs`` documents.
    α (``doc_alpha``, default 0.35, tuned on SQuAD train questions) keeps
    BM25's exact-term evidence and dense's paraphrase evidence on one scale;
    it is the best zero-shot stage on the pooled benchmark (bench/README.md).
``doc-hybrid``
    ``α · BM25 over documents / best + (1 − α) · mean-vector cosine``: both
    sides are document-level (the document's full text for BM25, as built;
    the normalized mean of its passage vectors, searched in its own FAISS
    index), so its cost grows with the number of documents, not passages —
    the ``auto`` stage of a large-profile build (:mod:`hiera.index.profile`).
    Each side contributes its top ``max(200, 4 · top_docs)`` documents; one a
    side misses gets that side's lowest score (the same policy as hybrid-max).
``fused``
    reciprocal-rank fusion (k = 60) of BM25 and dense passage-max (the two
    strongest stages on the pooled benchmark; fusing the weak summary and
    mean stages in pulled document top-1 from 87 to 50), divided by the
    best fused score so the top document scores 1 and λ keeps one scale.
``linked``
    the documents the linking pipeline (:mod:`hiera.link.pipeline`) links to
    the question: entity, event and decomposition linking, RRF-fused and
    divided by the best. Only linked documents score; with ``dhr`` this is
    "DHR over the linked documents". Its class is
    :class:`hiera.retrieve.linking.LinkedStage`: this module (which the link
    package itself uses for event linking) never imports the pipeline.

A filtered search (``q.filter``, an :class:`~hiera.query.Allowed`) reaches
every stage: each searches only the allowed documents (or, for the
passage-max stages, the allowed passages) through
:mod:`hiera.index.masked`, so its top ``k`` is the top ``k`` it would give
over a collection without the others; a stage that cannot (``linked``)
refuses the filter (``filters = False``).

All scores are "higher is better" and, after the stated normalization, lie
in [-1, 1], so ``passage score + λ · document score`` stays meaningful.

Each stage is one :class:`DocStage` subclass; its name, its class
(``module:Class``) and the index kinds it needs are declared in
:data:`hiera.spec.DOC_STAGES` (so a build can refuse a stage its indexes cannot
serve without importing scorers, and :func:`stage` imports a stage's class only
when it is asked for). Combining lists goes through :mod:`hiera.fusion`.
"""

from __future__ import annotations

from functools import cache
from typing import Any, ClassVar

import numpy as np

from hiera.collection import Collection
from hiera.errors import BadInputError
from hiera.fusion import Ranked, align, by_max, mix, rrf
from hiera.index.dense import faiss_search
from hiera.index.exact import TorchExactIndex
from hiera.index.masked import bm25_top, torch_top, vector_search
from hiera.index.passage_stage import DeviceSearch, DocLists
from hiera.index.select import DEEPEN, docs_from_passages, top_documents, topk
from hiera.query import Allowed, Query, QueryBatch
from hiera.spec import DOC_ALPHA, DOC_STAGES, DocStageSpec

HYBRID_ALPHA = DOC_ALPHA.default
# Passages each hybrid-max component looks at: enough to cover top_docs documents,
# few enough that an HNSW passage index answers quickly (its ef grows with k).
HYBRID_DEPTH = 200
PASSAGE_DEPTH = 1000


def _full(matrix: np.ndarray, q: np.ndarray, chunk: int = 262_144) -> np.ndarray:
    """``matrix @ q`` for a float16 (memory-mapped) or float32 matrix, in float32 chunks."""
    scores = np.empty(matrix.shape[0], dtype=np.float32)
    for s in range(0, matrix.shape[0], chunk):
        scores[s : s + chunk] = matrix[s : s + chunk].astype(np.float32, copy=False) @ q
    return scores


def _faiss_top(index: Any, q: np.ndarray, k: int, allowed: Allowed | None = None, level: str = "doc",
               matrix: Any = None) -> tuple[np.ndarray, np.ndarray]:
    """The index's top ``k`` (positions, scores); with ``allowed``, of the allowed rows only (``matrix`` gives the
    stored vectors for an exact scan of a small allowed set)."""
    if allowed is None:
        ids, sc = faiss_search(index, q, k)
    else:
        ids, sc = vector_search(index, matrix, q, k, allowed, level)
    keep = ids[0] >= 0
    return ids[0][keep].astype(np.int64), sc[0][keep]


def _bm25_top(index: Any, q: Query, k: int, level: str) -> tuple[np.ndarray, np.ndarray]:
    if q.filter is None:
        return index.search(q.text, k)
    return bm25_top(index, q.text, k, q.filter, level)


class DocStage:
    """One way of scoring documents. ``top`` returns the best ``k`` (positions, scores), best first."""

    name: ClassVar[str]
    filters: ClassVar[bool] = True  # honours a search filter (``q.filter``); one that cannot refuses it
    vectors: ClassVar[frozenset[str]] = frozenset()  # query vectors it reads: "qp" (passage encoder), "qd" (document encoder)

    @property
    def spec(self) -> DocStageSpec:
        return DOC_STAGES[self.name]

    @property
    def needs(self) -> tuple[str, ...]:
        return self.spec.needs

    def top(self, col: Collection, q: Query, k: int) -> tuple[np.ndarray, np.ndarray]:
        raise NotImplementedError

    def all(self, col: Collection, q: Query) -> np.ndarray:
        """Normalized score of every document (0 where the stage has no score for it)."""
        out = np.zeros(col.n_docs, dtype=np.float32)
        pos, sc = self.top(col, q, col.n_docs)
        out[pos] = sc
        return out

    def top_batch(self, col: Collection, batch: QueryBatch, k: int, on_device: bool = False) -> DocLists:
        """Every query's top ``k``; ``on_device``: a stage declared ``torch`` keeps them on the collection's torch
        device when its index is searched there (:meth:`_device_index`), else they are numpy arrays."""
        if batch.filter is not None and not self.filters:
            raise BadInputError(f"the {self.name!r} document stage cannot search with a filter")
        index = self._device_index(col) if on_device and "torch" in self.spec.backends else None
        if index is not None:
            import torch

            (vec,) = self.vectors
            if batch.filter is None:  # run by the passage stage, in its graph on a GPU
                return DocLists.deferred(DeviceSearch(index, batch.tensor(vec, index.device), k))
            with torch.inference_mode():
                scores, ids = torch_top(index, batch.tensor(vec, index.device), k, batch.filter, "doc")
            return DocLists(ids, scores)
        found = [self.top(col, q, k) for q in batch]
        return DocLists([f[0] for f in found], [f[1] for f in found])

    def _device_index(self, col: Collection) -> TorchExactIndex | None:
        return None


class _OneDenseSearch(DocStage):
    """A stage that is one search of a dense document index: searched exactly on a torch device, its documents
    stay there for the passage stage."""

    def index(self, col: Collection) -> Any:
        raise NotImplementedError

    def _device_index(self, col: Collection) -> TorchExactIndex | None:
        index = self.index(col)
        return index if isinstance(index, TorchExactIndex) else None


class Summary(_OneDenseSearch):
    name = "summary"
    vectors = frozenset({"qd"})

    def index(self, col: Collection) -> Any:
        return col.doc_faiss

    def top(self, col: Collection, q: Query, k: int) -> tuple[np.ndarray, np.ndarray]:
        return _faiss_top(col.doc_faiss, q.qd, k, q.filter, "doc", lambda: col.doc_vectors)

    def all(self, col: Collection, q: Query) -> np.ndarray:
        return _full(col.doc_vectors, q.qd)


class Mean(_OneDenseSearch):
    name = "mean"
    vectors = frozenset({"qp"})

    def index(self, col: Collection) -> Any:
        return col.doc_mean_faiss

    def top(self, col: Collection, q: Query, k: int) -> tuple[np.ndarray, np.ndarray]:
        if col.doc_mean_faiss is None:
            if q.filter is not None:
                rows = q.filter.doc_positions
                idx, sc = topk(np.asarray(col.doc_mean_vectors[rows], dtype=np.float32) @ q.qp, k)
                return rows[idx], sc
            return topk(_full(col.doc_mean_vectors, q.qp), k)
        return _faiss_top(col.doc_mean_faiss, q.qp, k, q.filter, "doc", lambda: col.doc_mean_vectors)

    def all(self, col: Collection, q: Query) -> np.ndarray:
        return _full(col.doc_mean_vectors, q.qp)


class Bm25(DocStage):
    name = "bm25"

    def top(self, col: Collection, q: Query, k: int) -> tuple[np.ndarray, np.ndarray]:
        pos, sc = _bm25_top(col.bm25_docs, q, k, "doc")
        return pos, by_max(sc)

    def all(self, col: Collection, q: Query) -> np.ndarray:
        s = col.bm25_docs.scores(q.text)
        m = float(s.max()) if len(s) else 0.0
        return s / m if m > 0 else s


class PassageMax(DocStage):
    name = "passage-max"
    vectors = frozenset({"qp"})

    def top(self, col: Collection, q: Query, k: int) -> tuple[np.ndarray, np.ndarray]:
        docs, dsc, _, _ = top_documents(
            lambda d: _faiss_top(col.passage_faiss, q.qp, d, q.filter, "passage", lambda: col.passage_vectors),
            col.passage_doc, k, max(PASSAGE_DEPTH, 4 * k), len(col.passage_doc))
        return docs, dsc


class Bm25PassageMax(DocStage):
    name = "bm25-passage-max"

    def top(self, col: Collection, q: Query, k: int) -> tuple[np.ndarray, np.ndarray]:
        docs, dsc, _, _ = top_documents(lambda d: _bm25_top(col.bm25_passages, q, d, "passage"),
                                        col.passage_doc, k, max(PASSAGE_DEPTH, 4 * k), len(col.passage_doc))
        return docs, by_max(dsc)


class _Mixed(DocStage):
    """A stage that mixes a lexical and a dense score of the same documents: ``α · lexical + (1 − α) · dense``.

    Subclasses say where the two scores come from (``components``); the mix, its ``doc_alpha`` and its depth
    are one rule for every such stage, so ``hiera tune``'s α means the same thing whichever stage it tunes.
    """

    vectors = frozenset({"qp"})

    def components(self, col: Collection, q: Query, depth: int, k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(documents, lexical score, dense score)`` of at least ``k`` documents whenever ``k`` can be scored."""
        raise NotImplementedError

    def top(self, col: Collection, q: Query, k: int) -> tuple[np.ndarray, np.ndarray]:
        alpha = float(q.params.get("doc_alpha", HYBRID_ALPHA))
        docs, b, d = self.components(col, q, max(HYBRID_DEPTH, 4 * k), k)
        if len(docs) == 0:
            return docs, np.zeros(0, dtype=np.float32)
        idx, fused = topk(mix(b, d, alpha), k)
        return docs[idx], fused


class HybridMax(_Mixed):
    """α · BM25 passage-max / best + (1 − α) · dense passage-max, each list the top ``max(200, 4k)`` passages."""

    name = "hybrid-max"

    def components(self, col: Collection, q: Query, depth: int, k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(documents, BM25 passage-max / best, dense passage-max)`` over the union of both lists.

        Long documents can fill both lists with fewer than ``k`` documents; the lists are then searched
        ``DEEPEN`` times deeper, as :func:`top_documents` does for one list, until ``k`` documents are in
        them or the dense list is exhausted (every passage, or every allowed one, is in it).
        """
        total = len(col.passage_doc)
        depth = max(1, min(int(depth), total))
        while True:
            (bpos, bsc), (pos, sc) = (col.passage_lists(q.text, q.qp, depth) if q.filter is None
                                      else col.passage_lists(q.text, q.qp, depth, q.filter))
            bdocs, bdsc, _ = docs_from_passages(col.passage_doc, bpos, bsc, col.n_docs)
            ddocs, ddsc, _ = docs_from_passages(col.passage_doc, pos, sc, col.n_docs)
            a = align([Ranked(bdocs, by_max(bdsc), complete=len(bpos) < depth), Ranked(ddocs, ddsc)])
            if len(a.ids) >= k or len(pos) < depth or depth >= total:
                break
            depth = min(total, depth * DEEPEN)
        return a.ids, a.scores[0], a.scores[1]


class Fused(DocStage):
    """RRF of BM25 and dense passage-max, divided by the best fused score."""

    name = "fused"
    components = ("bm25-passage-max", "passage-max")

    @property
    def vectors(self) -> frozenset[str]:  # type: ignore[override]
        return frozenset().union(*(stage(c).vectors for c in self.components))

    def top(self, col: Collection, q: Query, k: int) -> tuple[np.ndarray, np.ndarray]:
        depth = max(k, 100)
        lists = []
        for comp in self.components:
            pos, sc = stage(comp).top(col, q, depth)
            lists.append(Ranked(pos, sc))
        a, fused = rrf(lists)
        if len(a.ids) == 0:
            return a.ids, fused
        idx, sc = topk(fused, k)
        return a.ids[idx], by_max(sc)


class DocHybrid(_Mixed):
    """α · BM25 over documents / best + (1 − α) · mean-vector cosine (module docstring)."""

    name = "doc-hybrid"

    def components(self, col: Collection, q: Query, depth: int, k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(documents, BM25 / best, mean-vector cosine)`` over the union of both sides' top ``depth``
        (``depth`` ≥ ``k`` documents, so the dense side alone holds ``k`` whenever ``k`` are allowed)."""
        depth = min(depth, col.n_docs)
        bpos, bsc = _bm25_top(col.bm25_docs, q, depth, "doc")
        dpos, dsc = stage("mean").top(col, q, depth)
        a = align([Ranked(np.asarray(bpos, dtype=np.int64), by_max(bsc), complete=len(bpos) < depth),
                   Ranked(dpos, dsc)])
        return a.ids, a.scores[0], a.scores[1]


@cache
def stage(name: str) -> DocStage:
    """The stage called ``name`` (one shared, stateless instance), its class imported through the one table,
    :data:`hiera.spec.DOC_STAGES`."""
    spec = DOC_STAGES.get(name)
    if spec is None:
        raise BadInputError(f"unknown document stage {name!r}; known: {', '.join(DOC_STAGES)}")
    return spec.load()()
