"""Per-shard top-k lists → the global top-k, exactly as one index would rank them.

Every shard returns its own top ``k`` (positions local to the shard, scores).
Shifted by the shard's first position they are global positions; the global
top ``k`` is always inside the union of the shards' top ``k`` lists (a hit
outside its shard's top k has k better hits in that shard alone), so sorting
the union by (score descending, position ascending) and keeping ``k`` gives
the unsharded ranking, ties broken by position like
:func:`hiera.index.select.topk`.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def merge_topk(
    parts: Sequence[tuple[np.ndarray, np.ndarray]], starts: Sequence[int], k: int
) -> tuple[np.ndarray, np.ndarray]:
    """``(global positions, scores)`` of the best ``k`` over shards' ``(local positions, scores)``."""
    pos = [np.asarray(p, dtype=np.int64) + int(s) for (p, _), s in zip(parts, starts, strict=True)]
    sc = [np.asarray(v, dtype=np.float32) for _, v in parts]
    if not pos:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
    allp, alls = np.concatenate(pos), np.concatenate(sc)
    order = np.lexsort((allp, -alls))[:k]
    return allp[order], alls[order]


def merge_faiss(
    parts: Sequence[tuple[np.ndarray, np.ndarray]], starts: Sequence[int], k: int
) -> tuple[np.ndarray, np.ndarray]:
    """FAISS-shaped ``(scores, ids)`` of shape (n_queries, k) from shards' ``(ids, scores)``; -1 pads."""
    nq = parts[0][0].shape[0]
    out_ids = np.full((nq, k), -1, dtype=np.int64)
    out_sc = np.full((nq, k), -np.inf, dtype=np.float32)
    for q in range(nq):
        rows = []
        for (ids, sc), s in zip(parts, starts, strict=True):
            keep = ids[q] >= 0
            rows.append((ids[q][keep] + int(s), sc[q][keep]))
        pos, val = merge_topk([(p, v) for p, v in rows], [0] * len(rows), k)
        out_ids[q, : len(pos)], out_sc[q, : len(pos)] = pos, val
    return out_sc, out_ids
