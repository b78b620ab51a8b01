"""How documents are split into shards (where a sharded build keeps them: :mod:`hiera.index.manifest`).

A sharded build directory holds the collection-wide layout (``layout/``: the
global passage and document order every result is reported in) and one
directory per shard, each a self-contained index with its own manifest::

    builds/<id>/manifest.json          lists the shards (ranges + sha256 of each shard's manifest)
    builds/<id>/layout/                passage_rows.npy, doc_rows.npy, doc_offsets.npy (global)
    builds/<id>/shards/000/manifest.json, bm25-passages/, bm25-docs/, dense/
    builds/<id>/shards/001/…

Shard *i* holds documents ``docs[0]:docs[1]`` and their passages
``passages[0]:passages[1]`` of the global order: positions inside a shard plus
the range start are global positions.
"""

from __future__ import annotations

import numpy as np

from hiera.errors import BadInputError

MAX_SHARDS = 1024


def plan_ranges(doc_offsets: np.ndarray, n_shards: int) -> list[tuple[int, int]]:
    """``n_shards`` contiguous document ranges with about equal passage counts, each non-empty."""
    docs = len(doc_offsets) - 1
    if not 1 <= n_shards <= MAX_SHARDS:
        raise BadInputError(f"--shards must be in 1..{MAX_SHARDS}, got {n_shards}")
    if n_shards > docs:
        raise BadInputError(f"cannot split {docs} documents into {n_shards} shards (at most one shard per document)")
    total = int(doc_offsets[-1])
    cuts = [0]
    for i in range(1, n_shards):
        c = int(np.searchsorted(doc_offsets, total * i / n_shards, side="left"))
        cuts.append(min(max(c, cuts[-1] + 1), docs - (n_shards - i)))
    cuts.append(docs)
    return [(cuts[i], cuts[i + 1]) for i in range(n_shards)]
