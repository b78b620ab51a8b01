"""Searches restricted to the rows a filter allows (:class:`~hiera.query.Allowed`), exact and inside the index.

Each returns what the index would return if the disallowed rows had never
been in it (the collection's statistics, such as BM25's IDF, unchanged), and
picks the cheapest way to do so:

* BM25: only the allowed rows are scored (``Bm25Index.scores_at``, bit for
  bit the full scorer's values) when they are at most :data:`BM25_ROWS_SHARE`
  of the index; else the full score vector's positive scores with the
  disallowed ones dropped (bm25s's ``weight_mask``, applied to the sliver a
  query matches). Either way only positive scores are returned, as unfiltered.
* dense, on a torch exact index (``--dense-search exact``): the scan's
  disallowed scores are masked on the device before its top k.
* dense, on a FAISS index, by the allowed share of its rows:

  - at most :data:`PREFILTER_SHARE` (and :data:`PREFILTER_ROWS` rows):
    *pre-filtering*, the allowed rows' stored vectors scored exactly (a small
    gather beats a scan built for everything). Their float32 copy is made on
    the filter's first search and kept with the compiled filter: converting
    10k stored float16 rows on every query was most of a selective DHR
    search at 1M passages. It costs at most ``PREFILTER_ROWS × d × 4`` bytes
    per cached filter and level (30 MB at d = 384);
  - more: *oversampling*, the index's own search at depth
    ``k / share · OVERSAMPLE + 16``, its allowed rows kept: the first k
    allowed rows of a ranking are the top k of the allowed rows, so whenever k
    of them come back the result is the filtered search's (exact on Flat; on
    HNSW the search's queue, ``efSearch``, grows by the inverse of the allowed
    share, up to :data:`MAX_EF`, so its top ``depth`` is about as complete as
    an unfiltered top ``k``; IVF keeps its ``nprobe``);
  - a query left short (its allowed rows cluster far down its ranking)
    searches a graph again :data:`DEEPEN` times deeper; still short, an HNSW or IVF
    index searches with an ID selector (``SearchParameters(sel=IDSelectorBitmap)``:
    the graph search skips disallowed nodes in its results, with ``efSearch``
    raised by the inverse of the allowed share, up to :data:`MAX_EF`; IVF
    keeps its ``nprobe``), and a Flat index scores every row with numpy and
    masks the others (FAISS's selector makes a Flat scan go row by row, 7× an
    unfiltered search there; this costs about 1.5×, so such a query costs
    about 2.5× in all, where a query whose allowed rows come early costs 1×).

  On the pooled corpus (26k passages, Flat; ``bench/filters.py``) scanning
  the allowed rows stopped paying at about a quarter of them: at 10 % it cost
  half an unfiltered search, at 28 % as much, at 50 % twice as much, where the
  oversampled search costs about one.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from hiera.index.bm25 import Bm25Index
from hiera.index.exact import TorchExactIndex, best_first
from hiera.index.select import topk
from hiera.query import Allowed

BM25_ROWS_SHARE = 0.05  # allowed share of an index at or below which BM25 scores only the allowed rows
PREFILTER_ROWS = 20_000  # allowed rows at most, and
PREFILTER_SHARE = 0.2  # allowed share at most, for which a FAISS index is bypassed for an exact scan of just them
OVERSAMPLE = 2.0  # a larger allowed share: the index searched this many times k / share deep, allowed rows kept
DEEPEN, DEEPEN_TRIES = 8, 2  # a query left short searches a graph again this many times deeper, this many times
MAX_EF = 1024  # the largest efSearch a filtered HNSW search raises to


def bm25_strategy(size: int, allowed: Allowed, level: str) -> str:
    return "score-allowed-rows" if len(allowed.positions(level)) <= BM25_ROWS_SHARE * size else "mask-scores"


def bm25_top(index: Any, query: str, k: int, allowed: Allowed, level: str) -> tuple[np.ndarray, np.ndarray]:
    """The top ``k`` allowed rows of a BM25 index: ``(positions, scores)``, best first, positive scores only."""
    positions = allowed.positions(level)
    if bm25_strategy(index.size, allowed, level) == "score-allowed-rows":
        if isinstance(index, Bm25Index):  # the index restricted to the allowed rows, made once per filter
            rows = allowed._derive(("bm25-rows", level, id(index)), lambda: index.rows(positions))
            scores = rows.scores(query)
        else:  # a segmented or sharded index: its scores at the allowed rows
            scores = index.scores_at(query, positions)
        idx, vals = topk(scores, k, positive_only=True)
        return positions[idx], vals
    scores = index.scores(query)
    # the positive scores first (a query matches a sliver), then the mask on them: the same list as masking
    # every score and selecting among the positive ones, without a pass over the whole vector
    where = np.flatnonzero(scores > 0)
    where = where[allowed.level(level)[where]]
    idx, vals = topk(scores[where], k)
    return where[idx], vals


def vector_strategy(index: Any, allowed: Allowed, level: str) -> str:
    if isinstance(index, TorchExactIndex):
        return "device-gather" if len(allowed.positions(level)) <= PREFILTER_SHARE * index.ntotal else "device-mask"
    n = len(allowed.positions(level))
    if n <= PREFILTER_ROWS and n <= PREFILTER_SHARE * index.ntotal:
        return "prefilter-exact"
    return "oversample"


def vector_search(
    index: Any, matrix: Callable[[], Any], queries: np.ndarray, k: int, allowed: Allowed, level: str
) -> tuple[np.ndarray, np.ndarray]:
    """FAISS's ``(ids, scores)`` (n_queries × k', -1 where nothing is left) over the allowed rows only.

    ``matrix`` gives the stored vectors (called only to pre-filter).
    """
    q = np.ascontiguousarray(np.atleast_2d(queries), dtype=np.float32)
    positions = allowed.positions(level)
    k = max(0, min(int(k), len(positions)))
    if k == 0:
        return np.full((len(q), 0), -1, dtype=np.int64), np.zeros((len(q), 0), dtype=np.float32)
    strategy = vector_strategy(index, allowed, level)
    if strategy == "device-mask":
        return _torch_search(index, q, k, allowed, level)
    if strategy == "prefilter-exact":
        rows = allowed._derive(("prefilter-rows", level, id(index)),
                               lambda: np.ascontiguousarray(_rows(index, matrix)[positions], dtype=np.float32))
        return _prefilter(rows, q, k, positions)
    mask = allowed.level(level)
    share = len(positions) / max(1, index.ntotal)
    out_ids = np.full((len(q), k), -1, dtype=np.int64)
    out_sc = np.zeros((len(q), k), dtype=np.float32)
    todo = np.arange(len(q))
    depth = min(index.ntotal, int(np.ceil(k / share * OVERSAMPLE)) + 16)
    real = _downcast(index)
    graph = hasattr(real, "hnsw") or hasattr(real, "nprobe")
    for _ in range(DEEPEN_TRIES if graph else 1):  # a flat index is not searched again: each search is a full scan
        scores, ids = index.search(q[todo], depth, **_widened(real, share, depth))
        ok = (ids >= 0) & mask[np.maximum(ids, 0)]
        short = []
        for j, i in enumerate(todo):
            row = np.flatnonzero(ok[j])[:k]
            if len(row) < k and depth < index.ntotal:
                short.append(i)
                continue
            out_ids[i, : len(row)], out_sc[i, : len(row)] = ids[j, row], scores[j, row]
        todo = np.asarray(short, dtype=np.int64)
        if len(todo) == 0:
            return out_ids, out_sc
        depth = min(index.ntotal, depth * DEEPEN)
    # still short (allowed rows far down these queries' rankings): a graph index searches with the selector,
    # a flat one scans the allowed rows (FAISS's selector makes a flat scan row by row, several times slower)
    if graph:
        scores, ids = index.search(q[todo], k, params=_params(index, allowed, level, k))
    else:  # every row scored (a flat index's own float32 vectors when it has them), the others masked
        full = (np.asarray(_rows(index, matrix), dtype=np.float32) @ q[todo].T).T  # rows on the left: one gemm
        ids, scores = _prefilter(None, q[todo], k, positions, np.where(mask, full, np.float32(-np.inf)))
    out_ids[todo], out_sc[todo] = ids, scores
    return out_ids, out_sc


def _rows(index: Any, matrix: Callable[[], Any]) -> Any:
    """The vectors to score exactly: a flat FAISS index's own float32 rows (no conversion), else the stored matrix."""
    real = _downcast(index)
    if hasattr(real, "get_xb") and not hasattr(real, "hnsw"):
        import faiss

        return faiss.rev_swig_ptr(real.get_xb(), real.ntotal * real.d).reshape(real.ntotal, real.d)
    return matrix()


def _prefilter(rows: Any, q: np.ndarray, k: int, positions: np.ndarray,
               scores: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The exact top ``k`` of ``rows``, the float32 vectors of the rows at ``positions`` (FAISS's ``(ids, scores)``
    shape); or, given every row's ``scores`` (disallowed ones -inf), of those."""
    if scores is not None:
        ids = np.full((len(q), k), -1, dtype=np.int64)
        out = np.zeros((len(q), k), dtype=np.float32)
        for i, s in enumerate(scores):
            idx, vals = topk(s, k)
            keep = np.isfinite(vals)
            ids[i, : keep.sum()], out[i, : keep.sum()] = idx[keep], vals[keep]
        return ids, out
    scores = (rows @ q.T).T  # rows on the left: a row-major gemv, several times faster than q @ rows.T
    ids = np.full((len(q), k), -1, dtype=np.int64)
    out = np.zeros((len(q), k), dtype=np.float32)
    for i, s in enumerate(scores):
        idx, vals = topk(s, k)
        ids[i, : len(idx)], out[i, : len(idx)] = positions[idx], vals
    return ids, out


def _downcast(index: Any) -> Any:
    import faiss

    try:
        return faiss.downcast_index(index)
    except Exception:  # noqa: BLE001 - not a FAISS index (a stand-in shaped like one): no graph, no lists
        return index


def _filtered_ef(real: Any, share: float, k: int) -> int:
    """``efSearch`` for a filtered HNSW search: the index's own divided by the allowed share (at most
    :data:`MAX_EF`), so about as many allowed nodes stay in the search's queue as an unfiltered search keeps."""
    return int(min(MAX_EF, max(real.hnsw.efSearch, k, real.hnsw.efSearch / max(share, 1e-9))))


def _widened(real: Any, share: float, depth: int) -> dict[str, Any]:
    """The oversampled search's parameters: on an HNSW graph, :func:`_filtered_ef`. Searched ``depth`` deep
    at the index's own ``efSearch``, the graph's top ``depth`` is far less complete than its top ``k``, and the
    allowed rows among it are what the filter returns (real vectors, 26k passages, half the documents allowed:
    recall@20 0.957 against 0.994 widened; unfiltered 0.998)."""
    if not hasattr(real, "hnsw"):
        return {}
    import faiss

    return {"params": faiss.SearchParametersHNSW(efSearch=_filtered_ef(real, share, depth))}


def _params(index: Any, allowed: Allowed, level: str, k: int) -> Any:
    import faiss

    sel = allowed._derive(("faiss-selector", level), lambda: _selector(allowed.level(level)))[0]
    real = _downcast(index)
    if hasattr(real, "hnsw"):
        share = len(allowed.positions(level)) / max(1, index.ntotal)
        return faiss.SearchParametersHNSW(sel=sel, efSearch=_filtered_ef(real, share, k))
    if hasattr(real, "nprobe"):
        return faiss.SearchParametersIVF(sel=sel, nprobe=real.nprobe)
    return faiss.SearchParameters(sel=sel)


def _selector(mask: np.ndarray) -> tuple[Any, np.ndarray]:
    """An ``IDSelectorBitmap`` over ``mask`` and the packed bits it reads (kept alive beside it)."""
    import faiss

    bits = np.packbits(mask, bitorder="little")
    return faiss.IDSelectorBitmap(len(mask), faiss.swig_ptr(bits)), bits


def torch_top(index: TorchExactIndex, x: Any, k: int, allowed: Allowed, level: str) -> tuple[Any, Any]:
    """:meth:`TorchExactIndex.top` over the allowed rows: scores and ids (-1 past the allowed rows, score 0), on the
    device. At most :data:`PREFILTER_SHARE` of the rows: only they are gathered and scored (in float32); more: the
    whole scan, the others masked."""
    import torch

    k = max(1, min(int(k), index.ntotal))
    x = x.to(device=index.device, dtype=torch.float32)
    n = len(allowed.positions(level))
    if n <= PREFILTER_SHARE * index.ntotal:
        pos = allowed._derive(("positions-tensor", level, index.device),
                              lambda: torch.from_numpy(allowed.positions(level)).to(index.device))
        if n == 0:
            empty = torch.zeros((len(x), 0), device=index.device)
            return empty, empty.long()
        s, i = torch.topk(x @ index.matrix[pos].float().T, min(k, n), dim=1, sorted=False)
        return best_first(s, pos[i], k)
    mask = allowed.tensor(level, index.device)
    low = index.dtype != torch.float32
    depth = min(index.ntotal, 2 * k + 64) if low else k
    scan = (x.to(index.dtype) @ index.matrix.T).float().masked_fill(~mask, float("-inf"))
    s, i = torch.topk(scan, depth, dim=1, sorted=False)
    if low:
        s = torch.where(torch.isfinite(s), torch.einsum("bkd,bd->bk", index.matrix[i].float(), x), s)
    s, i = best_first(s, i, k)
    keep = torch.isfinite(s)
    return torch.where(keep, s, 0.0), torch.where(keep, i, -1)


def _torch_search(index: TorchExactIndex, q: np.ndarray, k: int, allowed: Allowed, level: str) -> tuple[Any, Any]:
    import torch

    with torch.inference_mode():
        s, i = torch_top(index, torch.from_numpy(q).to(index.device), k, allowed, level)
    return i.cpu().numpy(), s.cpu().numpy()


class MaskedIndex:
    """A FAISS index (or one shaped like it) seen through a filter: ``search`` returns allowed rows only, and
    ``ntotal`` counts them, so code written for an index (FetchHR's layer-by-layer exclusion) runs inside the filter
    unchanged."""

    def __init__(self, index: Any, matrix: Callable[[], Any], allowed: Allowed, level: str) -> None:
        self.index, self.matrix, self.allowed, self.level = index, matrix, allowed, level
        self.ntotal = len(allowed.positions(level))
        self.d = index.d

    def search(self, x: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """FAISS's ``(scores, ids)``."""
        ids, scores = vector_search(self.index, self.matrix, x, k, self.allowed, self.level)
        return scores, ids
