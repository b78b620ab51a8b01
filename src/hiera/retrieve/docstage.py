"""Document-stage scorers for hierarchical retrieval.

DHR's first stage picks the top-k1 documents; everything after it can only
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
    that list's lowest score: an upper bound of what it would have had).
    Each list is the top ``max(200, 4 · k1)`` passages.
    α (``doc_alpha``, default 0.35, tuned on SQuAD train questions) keeps
    BM25's exact-term evidence and dense's paraphrase evidence on one scale;
    it is the best zero-shot stage on the pooled benchmark (bench/README.md).
``fused``
    reciprocal-rank fusion (k = 60) of BM25 and dense passage-max (the two
    strongest stages on the pooled benchmark; fusing the weak summary and
    mean stages in pulled document top-1 from 87 to 50), divided by the
    best fused score so the top document scores 1 and λ keeps one scale.

All scores are "higher is better" and, after the stated normalization, lie
in [-1, 1], so ``passage score + λ · document score`` stays meaningful.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from hiera.collection import Collection
from hiera.errors import BadInputError
from hiera.index.build import DOC_STAGE_NEEDS
from hiera.index.dense import faiss_search
from hiera.index.select import topk
from hiera.retrieve.base import docs_from_passages

DOC_STAGES = tuple(DOC_STAGE_NEEDS)
HYBRID_ALPHA = 0.35
# Passages each hybrid-max component looks at: enough to cover k1 documents,
# few enough that an HNSW passage index answers quickly (its ef grows with k).
HYBRID_DEPTH = 200
DEFAULT_FUSED = ("bm25-passage-max", "passage-max")
RRF_K = 60
PASSAGE_DEPTH = 1000


def check_doc_stage(name: str) -> str:
    if name not in DOC_STAGES:
        raise BadInputError(f"unknown document stage {name!r}; known: {', '.join(DOC_STAGES)}")
    return name


def needs_vectors(name: str, components: tuple[str, ...] = DEFAULT_FUSED) -> set[str]:
    """Which query vectors (``qd`` doc encoder, ``qp`` passage encoder) a stage uses."""
    parts = components if name == "fused" else (name,)
    out = set()
    for p in parts:
        if p == "summary":
            out.add("qd")
        elif p in ("mean", "passage-max", "hybrid-max"):
            out.add("qp")
    return out


def _full(matrix: np.ndarray, q: np.ndarray, chunk: int = 262_144) -> np.ndarray:
    """``matrix @ q`` for a float16 (memory-mapped) or float32 matrix, in float32 chunks."""
    scores = np.empty(matrix.shape[0], dtype=np.float32)
    for s in range(0, matrix.shape[0], chunk):
        scores[s : s + chunk] = matrix[s : s + chunk].astype(np.float32, copy=False) @ q
    return scores


def score_docs(
    col: Collection,
    name: str,
    query: str,
    ctx: dict[str, Any],
    k1: int,
    components: tuple[str, ...] = DEFAULT_FUSED,
) -> tuple[np.ndarray, np.ndarray]:
    """Top-``k1`` (document positions, normalized scores), best first."""
    k1 = min(k1, col.n_docs)
    if name == "summary":
        ids, sc = faiss_search(col.doc_faiss, ctx["qd"], k1)
        keep = ids[0] >= 0
        return ids[0][keep].astype(np.int64), sc[0][keep]
    if name == "mean":
        if col.doc_mean_faiss is None:
            return topk(_full(col.doc_mean_vectors, ctx["qp"]), k1)
        ids, sc = faiss_search(col.doc_mean_faiss, ctx["qp"], k1)
        keep = ids[0] >= 0
        return ids[0][keep].astype(np.int64), sc[0][keep]
    if name == "bm25":
        pos, sc = col.bm25_docs.search(query, k1)
        return pos, (sc / sc[0] if len(sc) else sc)
    if name == "passage-max":
        ids, sc = faiss_search(col.passage_faiss, ctx["qp"], max(PASSAGE_DEPTH, 4 * k1))
        keep = ids[0] >= 0
        docs, dsc, _ = docs_from_passages(col.passage_doc, ids[0][keep], sc[0][keep], k1)
        return docs, dsc
    if name == "bm25-passage-max":
        pos, sc = col.bm25_passages.search(query, max(PASSAGE_DEPTH, 4 * k1))
        docs, dsc, _ = docs_from_passages(col.passage_doc, pos, sc, k1)
        return docs, (dsc / dsc[0] if len(dsc) else dsc)
    if name == "hybrid-max":
        return _hybrid_max(col, query, ctx, k1)
    if name == "fused":
        depth = max(k1, 100)
        fused: dict[int, float] = {}
        for comp in components:
            if comp == "fused":
                raise BadInputError("a fused document stage cannot contain itself")
            pos, _ = score_docs(col, check_doc_stage(comp), query, ctx, depth)
            for r, d in enumerate(pos):
                fused[int(d)] = fused.get(int(d), 0.0) + 1.0 / (RRF_K + r + 1)
        if not fused:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
        docs = np.fromiter(fused.keys(), dtype=np.int64, count=len(fused))
        vals = np.fromiter(fused.values(), dtype=np.float32, count=len(fused))
        idx, sc = topk(vals, k1)
        return docs[idx], sc / sc[0]
    raise BadInputError(f"unknown document stage {name!r}; known: {', '.join(DOC_STAGES)}")


def hybrid_components(
    col: Collection, query: str, ctx: dict[str, Any], depth: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(documents, BM25 passage-max / best, dense passage-max)`` over the union of both top lists."""
    bpos, bsc = col.bm25_passages.search(query, depth)
    bdocs, bdsc, _ = docs_from_passages(col.passage_doc, bpos, bsc, col.n_docs)
    if len(bdsc):
        bdsc = bdsc / bdsc[0]
    ids, sc = faiss_search(col.passage_faiss, ctx["qp"], depth)
    keep = ids[0] >= 0
    ddocs, ddsc, _ = docs_from_passages(col.passage_doc, ids[0][keep], sc[0][keep], col.n_docs)
    docs = np.union1d(bdocs, ddocs).astype(np.int64)
    b = np.full(len(docs), float(bdsc.min()) if len(bdsc) else 0.0, dtype=np.float32)
    d = np.full(len(docs), float(ddsc.min()) if len(ddsc) else 0.0, dtype=np.float32)
    b[np.searchsorted(docs, bdocs)] = bdsc
    d[np.searchsorted(docs, ddocs)] = ddsc
    return docs, b, d


def _hybrid_max(col: Collection, query: str, ctx: dict[str, Any], k1: int) -> tuple[np.ndarray, np.ndarray]:
    alpha = float(ctx.get("doc_alpha", HYBRID_ALPHA))
    docs, b, d = hybrid_components(col, query, ctx, max(HYBRID_DEPTH, 4 * k1))
    if len(docs) == 0:
        return docs, np.zeros(0, dtype=np.float32)
    idx, fused = topk(alpha * b + (1.0 - alpha) * d, k1)
    return docs[idx], fused


def score_all_docs(col: Collection, name: str, query: str, ctx: dict[str, Any]) -> np.ndarray:
    """Normalized score of every document (0 where a stage has no score)."""
    if name == "summary":
        return _full(col.doc_vectors, ctx["qd"])
    if name == "mean":
        return _full(col.doc_mean_vectors, ctx["qp"])
    if name == "bm25":
        s = col.bm25_docs.scores(query)
        m = float(s.max()) if len(s) else 0.0
        return s / m if m > 0 else s
    out = np.zeros(col.n_docs, dtype=np.float32)
    pos, sc = score_docs(col, name, query, ctx, col.n_docs)
    out[pos] = sc
    return out
