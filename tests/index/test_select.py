"""Top-k selection: ties at the cut are decided by position, whatever argpartition picks."""

from __future__ import annotations

import numpy as np
import pytest

from hiera.index.merge import merge_topk
from hiera.index.select import DEEPEN, top_documents, topk


def test_ties_at_the_cut_keep_the_lowest_positions() -> None:
    rng = np.random.default_rng(0)
    for _ in range(200):
        scores = rng.integers(0, 4, size=int(rng.integers(5, 60))).astype(np.float32)
        k = int(rng.integers(1, len(scores)))
        pos, vals = topk(scores, k)
        expected = np.lexsort((np.arange(len(scores)), -scores))[:k]
        assert pos.tolist() == expected.tolist()
        assert vals.tolist() == scores[expected].tolist()


def test_shard_merge_of_tied_scores_equals_one_index() -> None:
    """BM25 on short synthetic texts ties often: shards cut at k must merge to the unsharded top k."""
    rng = np.random.default_rng(1)
    for _ in range(100):
        scores = rng.integers(1, 3, size=90).astype(np.float32)
        k = int(rng.integers(1, 30))
        starts = [0, 30, 55]
        parts = [topk(scores[a:b], k) for a, b in zip(starts, [*starts[1:], 90], strict=True)]
        merged, _ = merge_topk(parts, starts, k)
        assert merged.tolist() == topk(scores, k)[0].tolist()


@pytest.mark.parametrize("seed", range(6))
def test_positive_only_equals_sorting_the_positive_scores(seed: int) -> None:
    """The positive-only path selects among the positive scores alone; the result is what a full sort gives."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 400))
    scores = rng.choice([0.0, 0.0, 0.0, -1.0, 1.0, 2.0, 2.5, 3.0], size=n).astype(np.float32)  # zeros, negatives, ties
    mask = rng.random(n) < 0.2
    scores[mask] = rng.random(int(mask.sum())).astype(np.float32)  # and some distinct values
    for k in (1, 5, 50, n, n + 10):
        idx, vals = topk(scores, k, positive_only=True)
        want = sorted((i for i in range(n) if scores[i] > 0), key=lambda i: (-scores[i], i))[:k]
        assert idx.tolist() == want
        np.testing.assert_array_equal(vals, scores[want])
    none = topk(np.zeros(7, dtype=np.float32), 3, positive_only=True)
    assert len(none[0]) == 0 and len(none[1]) == 0


def test_top_documents_searches_deeper_until_k_documents_and_stops_when_exhausted() -> None:
    rng = np.random.default_rng(0)
    passage_doc = np.repeat(np.arange(10), 12)  # ten documents of twelve passages
    scores = rng.random(len(passage_doc)).astype(np.float32)
    scores[:12] += 10.0  # document 0's passages outrank every other passage
    order = np.argsort(-scores, kind="stable")
    asked: list[int] = []

    def search(depth: int) -> tuple[np.ndarray, np.ndarray]:
        asked.append(depth)
        return order[:depth], scores[order[:depth]]

    docs, dsc, best, depth = top_documents(search, passage_doc, k=4, depth=3, total=len(passage_doc))
    # the reference: each document's best passage, documents by it
    ref = sorted(range(10), key=lambda d: -scores[passage_doc == d].max())[:4]
    assert docs.tolist() == ref and asked == [3, 3 * DEEPEN, 3 * DEEPEN ** 2] and depth == asked[-1]
    assert dsc.tolist() == [float(scores[passage_doc == d].max()) for d in ref]
    assert [int(passage_doc[b]) for b in best] == ref
    asked.clear()  # a search that returns fewer passages than asked is exhausted: one call, what it found
    docs, _, _, _ = top_documents(lambda d: search(d) if d < 5 else (order[:5], scores[order[:5]]), passage_doc,
                                  k=4, depth=3, total=len(passage_doc))
    assert len(docs) == 1
    docs, _, _, depth = top_documents(search, passage_doc, k=50, depth=100, total=len(passage_doc))
    assert len(docs) == 10 and depth == len(passage_doc)  # never deeper than every passage
