"""Fetching only new passages from a FAISS index, layer after layer: every index kind, and one that runs dry."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import TOPIC_QUERIES

from hiera.collection import Collection
from hiera.fetchhr.exclude import fetch_new
from hiera.index.dense import build_faiss, faiss_module, faiss_search

QUERY = TOPIC_QUERIES["jazz"]


@pytest.mark.parametrize("factory", ["Flat", "HNSW16", "IVF2,Flat"])
def test_exclusion_on_every_index_kind(col: Collection, fetchhr, factory: str) -> None:
    vecs = np.asarray(col.passage_vectors, dtype=np.float32)
    index = build_faiss(vecs, factory)
    qv = fetchhr.model(None).query_vectors([QUERY], [1, 2, 3])
    seen: set[int] = set()
    got = [fetch_new(index, qv[n], 3, seen, layer=n) for n in (1, 2, 3)]
    flat = [int(p) for f in got for p in f.positions]
    assert len(flat) == 9 and len(set(flat)) == 9 and seen == set(flat)
    assert all(len(f.positions) == 3 for f in got)


def test_an_approximate_index_that_runs_dry_gives_a_partial_layer(col: Collection, fetchhr) -> None:
    vecs = np.asarray(col.passage_vectors, dtype=np.float32)
    index = build_faiss(vecs, "IVF4,Flat")
    faiss_module().extract_index_ivf(index).nprobe = 1  # one list: fewer vectors than the collection holds
    qv = fetchhr.model(None).query_vectors([QUERY], [6])[6]
    reachable = int((faiss_search(index, qv, len(vecs))[0] >= 0).sum())
    f = fetch_new(index, qv, len(vecs), set(), layer=6)
    assert f.partial and len(f.positions) == reachable < len(vecs)
