"""Every way hiera combines scores, in one place: RRF, interpolation, max, and DHR's fused score.

One policy for a candidate missing from one of the lists being fused:

* rank-based fusion (RRF): a missing candidate contributes nothing from that
  list (its rank there is taken as beyond the list);
* score-based fusion (interpolation): a missing candidate gets that list's
  **lowest observed score** — an upper bound of what it would have had, since
  it did not make the list. After min-max normalization that is 0.

Candidates come back in ascending id order; :func:`hiera.index.select.topk`
then breaks ties by that order, so equal fused scores rank the smaller id
first on every surface.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

RRF_K = 60  # Cormack et al.'s constant, used by the hybrid retriever and the fused document stage


class Ranked(NamedTuple):
    """One ranking to fuse: ids (passage or document positions) and their scores, best first."""

    ids: np.ndarray
    scores: np.ndarray


class Aligned(NamedTuple):
    """The union of several rankings, with each list's score and 1-based rank per candidate (rank 0: absent)."""

    ids: np.ndarray  # ascending
    scores: np.ndarray  # (n_lists, n) float32, the list's lowest score where absent
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
        scores[i] = float(rsc.min())
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


def dhr_score(passage: np.ndarray, doc: np.ndarray, lam: float) -> np.ndarray:
    """DHR's final score: passage score + λ · document score (the paper's eq. 5)."""
    return passage + lam * doc
