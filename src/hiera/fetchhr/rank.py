"""The fetched union as one ranked list: every passage scored by one query vector, whichever layer fetched it.

Each layer scores its passages with its own query vector, and those scores
do not compare across layers (a head of layer 1 and the encoder's own
vector map into the passage space with different spreads), so ordering the
union by them put whatever the first layers fetched on top. Here every
fetched passage is scored again by one vector, the encoder's own query
vector (``rank=encoder``): the final layer computes it in the same forward
pass, it is the best single retriever among the layers (the paper's
Figure 3, and bench/fetchhr.py's), and re-scoring is one small product over
the fetched rows of the stored passage matrix. The set is unchanged; only
its order is. ``rank=layer`` keeps each layer's own score, for comparison.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from hiera.fetchhr.exclude import LayerFetch

RANKS = ("encoder", "layer")


@dataclass
class Union:
    """Every fetched passage once, in fetch order, with the layer that fetched it and its score and rank there."""

    positions: np.ndarray  # passage positions (int64)
    layers: np.ndarray  # the fetching layer of each
    layer_scores: np.ndarray  # its score under that layer's query vector
    layer_ranks: np.ndarray  # its rank (1-based) among that layer's fetches

    def __len__(self) -> int:
        return len(self.positions)


def union(fetched: Sequence[LayerFetch]) -> Union:
    """The layers' fetches concatenated (exclusion made them disjoint)."""
    if not fetched:
        empty = np.zeros(0, np.int64)
        return Union(empty, empty, np.zeros(0, np.float32), empty)
    return Union(
        np.concatenate([f.positions for f in fetched]).astype(np.int64),
        np.concatenate([np.full(len(f.positions), f.layer, np.int64) for f in fetched]),
        np.concatenate([f.scores for f in fetched]).astype(np.float32),
        np.concatenate([np.arange(1, len(f.positions) + 1, dtype=np.int64) for f in fetched]),
    )


def order(scores: np.ndarray) -> np.ndarray:
    """Best first; ties keep fetch order (earlier layers first), so a ranking is reproducible."""
    return np.argsort(-np.asarray(scores, dtype=np.float32), kind="stable")
