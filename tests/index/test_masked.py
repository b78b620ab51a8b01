"""Searches inside a filter, each strategy against brute force: pre-filtering, FAISS selectors, the device mask."""

from __future__ import annotations

import numpy as np
import pytest

from hiera.index import masked
from hiera.index.dense import build_faiss
from hiera.index.exact import TorchExactIndex
from hiera.index.select import topk
from hiera.query import Allowed


def _vectors(n: int = 3000, d: int = 32, seed: int = 0) -> np.ndarray:
    x = np.random.default_rng(seed).standard_normal((n, d)).astype(np.float32)
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float16)


def _allowed(n: int, share: float, seed: int = 1) -> Allowed:
    mask = np.random.default_rng(seed).random(n) < share
    return Allowed("test", mask, mask)


def _brute(vecs: np.ndarray, q: np.ndarray, mask: np.ndarray, k: int) -> np.ndarray:
    rows = np.flatnonzero(mask)
    scores = q @ vecs[rows].astype(np.float32).T
    return np.stack([rows[topk(s, k)[0]] for s in scores])


@pytest.mark.parametrize("share", [0.01, 0.1, 0.5])
@pytest.mark.parametrize("strategy", ["prefilter-exact", "oversample", "short"])
def test_flat_search_inside_a_filter_is_exact(monkeypatch: pytest.MonkeyPatch, share: float, strategy: str) -> None:
    """Each way gives the brute-force top k; ``short``: the oversampled search comes back short (at a depth of 17
    for k = 20) and every row is scored, the others masked."""
    vecs = _vectors()
    index = build_faiss(vecs, "Flat")
    allowed = _allowed(len(vecs), share)
    monkeypatch.setattr(masked, "PREFILTER_ROWS", 10**9 if strategy == "prefilter-exact" else 0)
    monkeypatch.setattr(masked, "PREFILTER_SHARE", 1.0)
    if strategy == "short":
        monkeypatch.setattr(masked, "OVERSAMPLE", 1e-6)
    assert masked.vector_strategy(index, allowed, "passage") == ("prefilter-exact" if strategy == "prefilter-exact"
                                                                 else "oversample")
    q = vecs[:8].astype(np.float32) + 0.05
    ids, _ = masked.vector_search(index, lambda: vecs, q, 20, allowed, "passage")
    assert np.array_equal(ids, _brute(vecs, q, allowed.passages, 20))


def test_prefiltering_converts_the_allowed_rows_once_per_filter() -> None:
    """A graph index pre-filters from the stored float16 matrix: the allowed rows' float32 copy is made on the
    filter's first search and reused (the matrix is not read again), and every search stays exact."""
    vecs = _vectors()
    index = build_faiss(vecs, "HNSW32")
    reads = []

    def matrix() -> np.ndarray:
        reads.append(1)
        return vecs

    allowed = _allowed(len(vecs), 0.05)
    assert masked.vector_strategy(index, allowed, "passage") == "prefilter-exact"
    for seed in range(3):
        q = vecs[seed * 8:(seed + 1) * 8].astype(np.float32) + 0.05
        ids, _ = masked.vector_search(index, matrix, q, 10, allowed, "passage")
        assert np.array_equal(ids, _brute(vecs, q, allowed.passages, 10))
    assert len(reads) == 1
    other = _allowed(len(vecs), 0.05, seed=2)  # another filter makes its own copy
    masked.vector_search(index, matrix, vecs[:2].astype(np.float32), 10, other, "passage")
    assert len(reads) == 2


@pytest.mark.parametrize("share", [0.1, 0.5])
@pytest.mark.parametrize("way", ["oversample", "deepened", "selector"])
def test_hnsw_inside_a_filter_keeps_its_recall(monkeypatch: pytest.MonkeyPatch, share: float, way: str) -> None:
    """Oversampled, searched again deeper (the first depth too shallow), or (still too few allowed rows) the selector's
    filtered graph search: recall@20 ≥ 0.95."""
    selector = way == "selector"
    if way == "deepened":
        monkeypatch.setattr(masked, "OVERSAMPLE", 1e-6)
    vecs = _vectors()
    index = build_faiss(vecs, "HNSW32")
    allowed = _allowed(len(vecs), share)
    monkeypatch.setattr(masked, "PREFILTER_ROWS", 0)
    if selector:
        monkeypatch.setattr(masked, "DEEPEN_TRIES", 0)
        calls = []
        real = masked._params
        monkeypatch.setattr(masked, "_params", lambda *a: calls.append(a) or real(*a))
    q = np.random.default_rng(5).standard_normal((20, vecs.shape[1])).astype(np.float32)
    ids, _ = masked.vector_search(index, lambda: vecs, q, 20, allowed, "passage")
    assert allowed.passages[ids[ids >= 0]].all()
    want = _brute(vecs, q, allowed.passages, 20)
    recall = np.mean([len(set(a) & set(b)) / 20 for a, b in zip(ids, want, strict=True)])
    assert recall >= 0.95
    assert not selector or calls


class _Spy:
    """An HNSW index that records each search's depth and ``efSearch`` (None: the index's own)."""

    def __init__(self, index: object) -> None:
        import faiss

        self.index, self.hnsw, self.ntotal, self.calls = index, faiss.downcast_index(index).hnsw, index.ntotal, []

    def search(self, q: np.ndarray, k: int, params: object = None) -> tuple[np.ndarray, np.ndarray]:
        self.calls.append((k, None if params is None else params.efSearch))
        return self.index.search(q, k, params=params)


@pytest.mark.parametrize("share", [0.5, 0.25, 0.05])
def test_the_oversampled_graph_search_widens_its_queue(monkeypatch: pytest.MonkeyPatch, share: float) -> None:
    """Searched k / share × 2 + 16 deep, the graph's queue grows by the inverse of the allowed share (at most
    MAX_EF): at its own efSearch (128) the top 96 is far less complete than the top 20 an unfiltered search
    returns. Every allowed row comes back ranked as brute force where the queue is that wide."""
    monkeypatch.setattr(masked, "PREFILTER_ROWS", 0)
    vecs = _vectors()
    spy = _Spy(build_faiss(vecs, "HNSW32"))
    allowed = _allowed(len(vecs), share)
    q = vecs[:4].astype(np.float32) + 0.05
    ids, _ = masked.vector_search(spy, lambda: vecs, q, 20, allowed, "passage")
    real_share = allowed.n_passages / len(vecs)
    assert spy.hnsw.efSearch == 128
    assert spy.calls[0] == (int(np.ceil(20 / real_share * masked.OVERSAMPLE)) + 16, min(1024, int(128 / real_share)))
    assert np.array_equal(ids, _brute(vecs, q, allowed.passages, 20))


@pytest.mark.parametrize(("share", "strategy"), [(0.01, "device-gather"), (0.5, "device-mask")])
def test_the_torch_exact_index_inside_a_filter(share: float, strategy: str) -> None:
    """A few allowed rows are gathered and scored alone, many are masked in the whole scan; either way exact, and k
    is cut to what the filter allows."""
    vecs = _vectors(500)
    index = TorchExactIndex(vecs, "cpu")
    allowed = _allowed(len(vecs), share, seed=3)
    assert masked.vector_strategy(index, allowed, "passage") == strategy
    q = vecs[:4].astype(np.float32)
    k = min(50, allowed.n_passages)
    ids, scores = masked.vector_search(index, lambda: vecs, q, 50, allowed, "passage")
    assert ids.shape[1] == k
    assert np.array_equal(ids, _brute(vecs, q, allowed.passages, k))


class _Bm25:
    """BM25's two scoring calls over a fixed score vector (sparse, as BM25's are)."""

    def __init__(self, scores: np.ndarray) -> None:
        self.s = scores
        self.size = len(scores)

    def scores(self, query: str) -> np.ndarray:
        return self.s

    def scores_at(self, query: str, positions: np.ndarray) -> np.ndarray:
        return self.s[positions]


@pytest.mark.parametrize("share", [0.01, 0.5])
def test_bm25_strategies_agree(monkeypatch: pytest.MonkeyPatch, share: float) -> None:
    rng = np.random.default_rng(2)
    s = np.where(rng.random(5000) < 0.3, rng.random(5000), 0).astype(np.float32)
    s[::7] = s[3]  # ties
    allowed = _allowed(len(s), share)
    got = []
    for rows_share in (1.0, 0.0):
        monkeypatch.setattr(masked, "BM25_ROWS_SHARE", rows_share)
        got.append(masked.bm25_top(_Bm25(s), "q", 40, allowed, "passage"))
    rows = np.flatnonzero(allowed.passages & (s > 0))
    idx, vals = topk(s[rows], 40)
    for pos, sc in got:
        assert np.array_equal(pos, rows[idx]) and np.array_equal(sc, vals)
