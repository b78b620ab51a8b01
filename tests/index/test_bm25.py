"""BM25 over candidates only equals the full score vector at those positions, bit for bit."""

from __future__ import annotations

import numpy as np
import pytest

from hiera.index.bm25 import Bm25Index


@pytest.fixture(scope="module")
def index() -> tuple[Bm25Index, int]:
    rng = np.random.default_rng(0)
    words = [f"w{i}" for i in range(800)] + ["the", "river", "rivers", "bridge"]
    texts = [" ".join(rng.choice(words, size=int(rng.integers(1, 50)))) for _ in range(3000)]
    texts[7] = ""  # a text without tokens
    return Bm25Index.build(texts), len(texts)


@pytest.mark.parametrize("query", ["w1 w2 w3 w1", "rivers and a bridge", "w17 w799 unknownword", "zzz", "the",
                                   " ".join(f"w{i}" for i in range(0, 800, 13))])
def test_scores_at_equals_the_full_vector(index, query: str) -> None:
    idx, n = index
    full = idx.scores(query)
    rng = np.random.default_rng(len(query))
    # in any order, every row, a filter's allowed rows (increasing: rare terms are searched the other way), a few
    for pos in (rng.choice(n, 300, replace=False), np.arange(n), np.sort(rng.choice(n, 1500, replace=False)),
                np.array([0, n - 1, 7]), np.zeros(0, dtype=np.int64)):
        got = idx.scores_at(query, pos)
        assert got.dtype == np.float32 and np.array_equal(got, full[pos])
    # duplicates and any order are fine
    pos = np.array([5, 5, 2999, 1])
    assert np.array_equal(idx.scores_at(query, pos), full[pos])


@pytest.mark.parametrize("query", ["w1 w2 w3 w1", "rivers and a bridge", "the", "zzz"])
def test_an_index_restricted_to_rows_scores_as_scores_at(index, query: str) -> None:
    """A filter's allowed rows made into their own index give scores_at's scores, bit for bit."""
    idx, n = index
    rng = np.random.default_rng(3)
    for pos in (np.sort(rng.choice(n, 40, replace=False)), np.arange(n), np.array([7]), np.zeros(0, dtype=np.int64)):
        rows = idx.rows(pos)
        got = rows.scores(query)
        assert got.dtype == np.float32 and np.array_equal(got, idx.scores_at(query, pos))
        assert len(rows.data) <= len(idx.retriever.scores["data"])
