"""Every way hiera combines scores, in one place: RRF, interpolation, max, and DHR's fused score.

A leaf below the collections and indexes: DHR's passage stage runs on numpy
arrays (one query) and on torch tensors (a padded batch on a GPU), and both
backends call :func:`passage_score` and :func:`dhr_score` here, so the two
cannot drift apart.

One policy for a candidate missing from one of the lists being fused:

* rank-based fusion (RRF): a missing candidate contributes nothing from that
  list (its rank there is taken as beyond the list);
* score-based fusion (interpolation): a missing candidate gets that list's
  **lowest observed score** — an upper bound of what it would have had, since
  it did not make the list. After min-max normalization that is 0. A list
  marked ``complete`` (a BM25 list shorter than its depth holds every match)
  gives its missing candidates 0 instead: their score is known (the hybrid
  document stages, :mod:`hiera.score.docstage`).

Candidates come back in ascending id order; :func:`hiera.index.select.topk`
then breaks ties by that order, so equal fused scores rank the smaller id
first on every surface.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np

RRF_K = 60  # Cormack et al.'s constant, used by the hybrid retriever and the fused document stage


class Ranked(NamedTuple):
    """One ranking to fuse: ids (passage or document positions) and their scores, best first.

    ``complete``: the list holds every candidate with a score (a BM25 list shorter than its depth holds every
    match), so one it lacks scores 0, not the list's lowest score.
    """

    ids: np.ndarray
    scores: np.ndarray
    complete: bool = False


class Aligned(NamedTuple):
    """The union of several rankings, with each list's score and 1-based rank per candidate (rank 0: absent)."""

    ids: np.ndarray  # ascending
    scores: np.ndarray  # (n_lists, n) float32, the list's lowest score where absent (0 from a complete list)
    ranks: np.ndarray  # (n_lists, n) int64, 0 where absent


def align(lists: Sequence[Ranked]) -> Aligned:
    ids = np.unique(np.concatenate([np.asarray(r.ids, dtype=np.int64) for r in lists])) if lists else np.zeros(0, np.int64)
    scores = np.zeros((len(lists), len(ids)), dtype=np.float32)
    ranks = np.zeros((len(lists), len(ids)), dtype=np.int64)
    for i, r in enumerate(lists):
        rid = np.asarray(r.ids, dtype=np.int64)
        if len(rid) == 0:
            continue
        rsc = np.asarray(r.scores, dtype=np.float32)
        # first occurrence wins: a list is best first
        uniq, first = np.unique(rid, return_index=True)
        where = np.searchsorted(ids, uniq)
        scores[i] = 0.0 if r.complete else float(rsc.min())
        scores[i, where] = rsc[first]
        ranks[i, where] = first + 1
    return Aligned(ids, scores, ranks)


def rrf(lists: Sequence[Ranked], k: int = RRF_K) -> tuple[Aligned, np.ndarray]:
    """Σ over lists of 1 / (k + rank); absent candidates add nothing. Returns (aligned, fused float32)."""
    a = align(lists)
    fused = np.zeros(len(a.ids), dtype=np.float64)
    for row in a.ranks:
        fused += np.where(row > 0, 1.0 / (k + row), 0.0)
    return a, fused.astype(np.float32)


def minmax(x: np.ndarray) -> np.ndarray:
    """Scale to [0, 1]; a constant list becomes all ones (every member equally good)."""
    if len(x) == 0:
        return x
    lo, hi = float(x.min()), float(x.max())
    return (x - lo) / (hi - lo) if hi > lo else np.ones_like(x)


def by_max(x: np.ndarray) -> np.ndarray:
    """Divide by the best score so the top scores 1 (BM25 and RRF scores have no fixed scale).

    Unchanged when nothing scores above 0.
    """
    top = float(x.max()) if len(x) else 0.0
    return x / top if top > 0 else x


def interpolate(lists: Sequence[Ranked], weights: Sequence[float]) -> tuple[Aligned, np.ndarray]:
    """Σ weight · score over lists (scores as given: normalize first); absent → the list's lowest score."""
    a = align(lists)
    fused = np.zeros(len(a.ids), dtype=np.float32)
    for w, row in zip(weights, a.scores, strict=True):
        fused = fused + float(w) * row
    return a, fused


def mix(first: np.ndarray, second: np.ndarray, alpha: float) -> np.ndarray:
    """α · first + (1 − α) · second over aligned scores (hybrid-max's document score; what tune re-weights)."""
    return alpha * first + (1.0 - alpha) * second


def dhr_score(passage: Any, doc: Any, lam: float) -> Any:
    """DHR's final score: passage score + λ · document score (the paper's eq. 5). numpy arrays or torch tensors."""
    return passage + lam * doc


def _row_max(x: Any) -> Any:
    """The largest value of each row (the last axis), kept as a column: numpy or torch."""
    if isinstance(x, np.ndarray):
        return x.max(axis=-1, keepdims=True) if x.shape[-1] else np.zeros((*x.shape[:-1], 1), x.dtype)
    return x.amax(dim=-1, keepdim=True)


def passage_score(dense: Any | None, bm25: Any | None, alpha: float) -> Any:
    """DHR's passage-stage score of each candidate: ``α · BM25 / best + (1 − α) · dense``.

    ``best`` is the query's best BM25 score among its candidates (the last
    axis: one query's 1-D array, or a batch's rows with padding scored 0);
    a query where nothing scores above 0 keeps its BM25 as it is
    (:func:`by_max`). ``α`` = 0 is the paper's dense-only stage (``bm25`` may
    be ``None``), ``α`` = 1 hierarchical BM25 (``dense`` may be ``None``).
    Works on numpy arrays and torch tensors alike.
    """
    if alpha <= 0 or bm25 is None:
        if dense is None:
            raise ValueError("the passage stage needs dense scores when passage_alpha is 0")
        return dense
    top = _row_max(bm25)
    norm = bm25 / (top * (top > 0) + (top <= 0))  # by_max, row by row
    if alpha >= 1 or dense is None:
        return norm
    return mix(norm, dense, alpha)
