"""Layer after layer, k new results each: one nearest-neighbour search for every layer, exclusion after it.

FAISS has no "exclude these ids" for every index type it builds, so the
layers' query vectors are searched together, in one batched call, at the
depth that serves every layer of an exact index: layer ℓ needs ``k_ℓ``
passages none of the earlier layers took, and those took ``Σ_{j<ℓ} k_j``, so
its first ``k_ℓ + Σ_{j<ℓ} k_j`` results always hold them; the largest of
these depths is ``Σ k``. The exclusion then walks the layers in order over
the rows that one search returned (no search per layer: six searches of a
Flat index cost six scans of the matrix, one batched search about one).

An approximate index (IVF with a small nprobe, HNSW) may return fewer new
passages than a layer needs at that depth; such a layer alone is searched
again, deeper, doubling while it stays short (:func:`fetch_new`). When the
index has nothing more to give (fewer results than asked for, or the whole
index searched) the layer stops short and says so: a partial result, never a
repeated passage.

At document level the unit is the document (``keys`` maps a passage to its
document): a layer fetches ``k`` documents no earlier layer fetched, each
represented by its best passage.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from hiera.index.dense import faiss_search

PER_KEY = 4  # documents hold several passages: at document level a search starts this much deeper


@dataclass
class LayerFetch:
    """What one layer fetched: passage positions and scores (best first) and how deep it searched.

    ``searches`` counts the searches of this layer alone: 0 when the shared
    batched search served it, more when an approximate index made it search
    again.
    """

    layer: int
    positions: np.ndarray
    scores: np.ndarray
    wanted: int
    depth: int  # the search depth its results came from (k′)
    searches: int
    ms: float = 0.0  # its exclusion, and its own searches if it made any

    @property
    def partial(self) -> bool:
        return len(self.positions) < self.wanted


def shared_depth(budgets: Sequence[int], ntotal: int, documents: bool = False) -> int:
    """The depth of the one search that serves every layer of an exact index: ``Σ k`` (× :data:`PER_KEY` for documents)."""
    return min(int(ntotal), max(1, sum(int(b) for b in budgets) * (PER_KEY if documents else 1)))


def take_new(positions: np.ndarray, k: int, seen: set[int], keys: np.ndarray | None = None) -> tuple[list[int], set[int]]:
    """Indices into ``positions`` (best first) of the first ``k`` whose key is neither in ``seen`` nor repeated, and their keys."""
    keep: list[int] = []
    taken: set[int] = set()
    if k <= 0:
        return keep, taken
    ks = positions.tolist() if keys is None else keys[positions].tolist()
    for i, key in enumerate(ks):
        if key in seen or key in taken:
            continue
        keep.append(i)
        taken.add(key)
        if len(keep) == k:
            break
    return keep, taken


def fetch_layers(
    index,
    queries: np.ndarray,
    budgets: Sequence[int],
    layers: Sequence[int],
    keys: np.ndarray | None = None,
    found: tuple[np.ndarray, np.ndarray] | None = None,
) -> list[LayerFetch]:
    """Every layer's ``budgets[i]`` results no earlier layer fetched, from one batched search of ``queries`` (row i: ``layers[i]``).

    ``found``: the ``(positions, scores)`` rows of that search already made
    at :func:`shared_depth` (the benchmark searches many questions at once).
    A layer with budget 0 is skipped (an empty fetch).
    """
    ntotal = int(index.ntotal)
    depth = shared_depth(budgets, ntotal, keys is not None)
    if found is None:
        ids, sc = faiss_search(index, queries, depth)
    else:
        ids, sc = found
    seen: set[int] = set()
    out: list[LayerFetch] = []
    for row, (layer, k) in enumerate(zip(layers, budgets, strict=True)):
        t = time.perf_counter()
        if k <= 0:
            out.append(LayerFetch(layer, np.zeros(0, np.int64), np.zeros(0, np.float32), 0, 0, 0))
            continue
        valid = ids[row] >= 0
        pos, scores = ids[row][valid], sc[row][valid]
        keep, taken = take_new(pos, k, seen, keys)
        exhausted = len(pos) < depth or depth >= ntotal
        if len(keep) < k and not exhausted:  # an approximate index came up short: this layer searches again
            out.append(fetch_new(index, queries[row], k, seen, keys, layer, start=min(ntotal, depth * 2)))
        else:
            seen |= taken
            idx = np.asarray(keep, dtype=np.int64)
            out.append(LayerFetch(layer, pos[idx].astype(np.int64), scores[idx].astype(np.float32), k, depth, 0))
        out[-1].ms = (time.perf_counter() - t) * 1000
    return out


def fetch_new(
    index, query: np.ndarray, k: int, seen: set[int], keys: np.ndarray | None = None, layer: int = 0,
    start: int | None = None,
) -> LayerFetch:
    """``k`` results of ``query`` whose key (passage, or ``keys[passage]``) is not in ``seen``; adds them to ``seen``.

    One layer alone: searches from depth ``start`` (default ``k + |seen|``,
    enough on an exact index) and doubles while too few are new.
    """
    ntotal = int(index.ntotal)
    depth = min(ntotal, start or (k + len(seen)) * (1 if keys is None else PER_KEY))
    searches = 0
    while True:
        ids, sc = faiss_search(index, query, max(depth, 1))
        searches += 1
        valid = ids[0] >= 0
        pos, scores = ids[0][valid], sc[0][valid]
        keep, taken = take_new(pos, k, seen, keys)
        exhausted = len(pos) < depth or depth >= ntotal
        if len(keep) == k or exhausted:
            break
        depth = min(ntotal, depth * 2)
    seen |= taken
    idx = np.asarray(keep, dtype=np.int64)
    return LayerFetch(layer, pos[idx].astype(np.int64), scores[idx].astype(np.float32), k, depth, searches)
