"""The fetched union: every passage once with its layer, its score and rank there; a stable order."""

from __future__ import annotations

import numpy as np

from hiera.fetchhr.exclude import LayerFetch
from hiera.fetchhr.rank import order, union


def _fetch(layer: int, positions: list[int], scores: list[float]) -> LayerFetch:
    return LayerFetch(layer, np.asarray(positions, np.int64), np.asarray(scores, np.float32), len(positions), 9, 0)


def test_union_keeps_each_passages_layer_score_and_rank() -> None:
    u = union([_fetch(1, [7, 3], [0.9, 0.8]), _fetch(4, [], []), _fetch(6, [5, 1, 2], [0.5, 0.4, 0.3])])
    assert len(u) == 5
    assert u.positions.tolist() == [7, 3, 5, 1, 2]
    assert u.layers.tolist() == [1, 1, 6, 6, 6]
    assert u.layer_ranks.tolist() == [1, 2, 1, 2, 3]
    np.testing.assert_allclose(u.layer_scores, [0.9, 0.8, 0.5, 0.4, 0.3])
    assert len(union([])) == 0


def test_order_is_best_first_and_ties_keep_fetch_order() -> None:
    assert order(np.asarray([0.2, 0.7, 0.2, 0.9])).tolist() == [3, 1, 0, 2]
    assert order(np.asarray([0.5, 0.5, 0.5])).tolist() == [0, 1, 2]
    # a re-scoring that disagrees with the layers' own order reorders across layers
    u = union([_fetch(1, [10, 11], [0.9, 0.8]), _fetch(2, [12, 13], [0.3, 0.2])])
    rescored = np.asarray([0.1, 0.6, 0.7, 0.2])
    assert u.positions[order(rescored)].tolist() == [12, 11, 13, 10]
