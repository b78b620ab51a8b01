"""A filtered search on three shards gives the unsharded build's filtered results, method by method."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from hiera.builds import open_collection
from hiera.retrieve import get_retriever

QUERIES = ["how do volcanoes erupt", "the knight on the chessboard", "bees making honey in the hive"]
FILTERS = ["not categories = Geology", "id in (volcanoes, chess, honeybees)", "section prefix types or section = ''"]
METHODS = [("bm25", {}), ("dense", {}), ("hybrid", {}), ("dhr", {}), ("dhr", {"doc_stage": "mean"}),
           ("dhr-parallel", {}), ("bm25-dhr", {})]


@pytest.mark.parametrize(("method", "params"), METHODS, ids=[f"{m}{p}" for m, p in METHODS])
def test_three_shards_filter_as_one_index(unsharded: Path, sharded3: Path, method: str, params: dict) -> None:
    one, three = open_collection(unsharded), open_collection(sharded3)
    for expr in FILTERS:
        a = get_retriever(method, one).batch_search(QUERIES, 8, filter=expr, **params)
        b = get_retriever(method, three).batch_search(QUERIES, 8, filter=expr, **params)
        for x, y in zip(a, b, strict=True):
            assert [h.passage_id for h in x.hits] == [h.passage_id for h in y.hits], (method, expr, x.query)
            np.testing.assert_allclose([h.score for h in x.hits], [h.score for h in y.hits], atol=1e-4)
