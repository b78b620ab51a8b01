"""Layer after layer, k new results each: nearest-neighbour search that skips what earlier layers fetched.

FAISS has no "exclude these ids" for every index type it builds, so each
layer searches with a growing depth: first ``k + |already fetched|`` (for an
exact index that depth always holds ``k`` new passages, so one search is
enough), then doubling while an approximate index (IVF with a small nprobe,
HNSW) returns too few new ones. When the index has nothing more to give
(fewer results than asked for, or the whole index searched) the layer stops
short and says so: a partial result, never a repeated passage.

At document level the unit is the document (``keys`` maps a passage to its
document): a layer fetches ``k`` documents no earlier layer fetched, each
represented by its best passage.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hiera.index.dense import faiss_search


@dataclass
class LayerFetch:
    """What one layer fetched: passage positions and scores (best first) and how deep it searched."""

    layer: int
    positions: np.ndarray
    scores: np.ndarray
    wanted: int
    depth: int  # the search depth it ended at (k′)
    searches: int

    @property
    def partial(self) -> bool:
        return len(self.positions) < self.wanted


def fetch_new(
    index, query: np.ndarray, k: int, seen: set[int], keys: np.ndarray | None = None, layer: int = 0
) -> LayerFetch:
    """``k`` results of ``query`` whose key (passage, or ``keys[passage]``) is not in ``seen``; adds them to ``seen``."""
    ntotal = int(index.ntotal)
    per_key = 1 if keys is None else 4  # documents hold several passages: start deeper
    depth = min(ntotal, (k + len(seen)) * per_key)
    searches = 0
    while True:
        ids, sc = faiss_search(index, query, max(depth, 1))
        searches += 1
        valid = ids[0] >= 0
        pos, scores = ids[0][valid], sc[0][valid]
        keep: list[int] = []
        taken: set[int] = set()
        for i, p in enumerate(pos):
            key = int(p) if keys is None else int(keys[p])
            if key in seen or key in taken:
                continue
            keep.append(i)
            taken.add(key)
            if len(keep) == k:
                break
        exhausted = len(pos) < depth or depth >= ntotal
        if len(keep) == k or exhausted:
            break
        depth = min(ntotal, depth * 2)
    seen |= taken
    idx = np.asarray(keep, dtype=np.int64)
    return LayerFetch(layer, pos[idx].astype(np.int64), scores[idx].astype(np.float32), k, depth, searches)
