"""Top-k selection and range gathering: the numpy core every retriever shares."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np


def topk(scores: np.ndarray, k: int, positive_only: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Positions and values of the ``k`` largest scores, best first, ties by position.

    ``positive_only`` selects among the positive scores alone: a BM25 query
    matches a sliver of a large collection, and partitioning all 5M scores
    to find 200 cost 16 ms a query where the sliver costs about one.
    """
    if positive_only:
        where = np.flatnonzero(scores > 0)
        if len(where) < scores.shape[0]:
            idx, vals = topk(scores[where], k)  # ``where`` is sorted: ties still go to the lower position
            return where[idx], vals
        # every score is positive: the plain selection below is already positive only
    n = scores.shape[0]
    k = min(k, n)
    if k <= 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
    if k < n:
        part = np.argpartition(-scores, k - 1)[:k]
        # argpartition keeps an arbitrary subset of the values tied at the cut: take the lowest positions,
        # so that the top k is a function of the scores alone (sharded searches merge to the same list)
        kth = scores[part].min()
        ties = np.flatnonzero(scores == kth)
        if len(ties) > 1:
            above = part[scores[part] > kth]
            part = np.concatenate([above, ties[: k - len(above)]])
    else:
        part = np.arange(n)
    order = np.lexsort((part, -scores[part]))
    idx = part[order]
    vals = scores[idx]
    return idx.astype(np.int64), vals.astype(np.float32)


def concat_ranges(starts: Sequence[int] | np.ndarray, ends: Sequence[int] | np.ndarray) -> np.ndarray:
    """``np.concatenate([arange(s, e) ...])`` without a Python loop."""
    starts = np.asarray(starts, dtype=np.int64)
    ends = np.asarray(ends, dtype=np.int64)
    lens = ends - starts
    total = int(lens.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    offs = np.repeat(starts - np.concatenate(([0], np.cumsum(lens)[:-1])), lens)
    return np.arange(total, dtype=np.int64) + offs


def ranks_of(scores: np.ndarray) -> np.ndarray:
    """1-based rank of each score within its array (descending, stable)."""
    order = np.argsort(-scores, kind="stable")
    ranks = np.empty(len(scores), dtype=np.int64)
    ranks[order] = np.arange(1, len(scores) + 1)
    return ranks


def docs_from_passages(
    passage_doc: np.ndarray, positions: np.ndarray, scores: np.ndarray, k: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Max-passage document ranking from a passage ranking (best first).

    Returns (doc positions, doc scores, best passage position per doc).
    """
    positions = np.asarray(positions, dtype=np.int64)
    if len(positions) == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32), np.zeros(0, dtype=np.int64)
    docs = np.asarray(passage_doc[positions], dtype=np.int64)
    # The input is best first, so a document's first occurrence is its best passage.
    uniq, first = np.unique(docs, return_index=True)
    first = np.sort(first)[:k]
    return docs[first], np.asarray(scores, dtype=np.float32)[first], positions[first]


DEEPEN = 4  # how much deeper a passage search goes when its passages held too few documents


def top_documents(
    search: Callable[[int], tuple[np.ndarray, np.ndarray]], passage_doc: np.ndarray, k: int, depth: int, total: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """The max-passage top ``k`` documents of a passage search, searched deeper until ``k`` documents are found.

    ``search(d)`` ranks the best ``d`` passages (best first). Every document
    whose best passage is among them gets its exact max-passage score and
    place, but long documents can fill ``d`` passages with fewer than ``k``
    documents; the search then runs again ``DEEPEN`` times deeper, up to all
    ``total`` passages, so that ``k`` documents come back whenever ``k`` have a
    passage the search returns. A search that returns fewer than ``d``
    passages (a filter, BM25's matching passages) is exhausted and ends it.
    Returns (doc positions, doc scores, best passage per doc, depth searched).
    """
    depth = max(1, min(int(depth), int(total)))
    while True:
        pos, sc = search(depth)
        docs, dsc, best = docs_from_passages(passage_doc, pos, sc, k)
        if len(docs) >= k or len(pos) < depth or depth >= total:
            return docs, dsc, best, depth
        depth = min(int(total), depth * DEEPEN)
