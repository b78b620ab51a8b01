"""FetchHR's retriever: exclusion across layers, single-layer mode, budgets, errors (its package: tests/fetchhr/)."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from helpers import TOPIC_QUERIES

from hiera.collection import Collection
from hiera.errors import BadInputError
from hiera.fetchhr.layers import parse_k_per_layer
from hiera.index.dense import faiss_search
from hiera.retrieve import get_retriever

QUERY = TOPIC_QUERIES["jazz"]


def _layer(hit) -> int:
    (name,) = hit.stages
    assert name.startswith("layer")
    return int(name[5:])


def test_no_passage_twice_and_k_new_per_layer(fetchhr, col: Collection) -> None:
    res = fetchhr.search(QUERY, k=12, k_per_layer="2")
    ids = [h.passage_id for h in res.hits]
    assert len(ids) == 12 and len(set(ids)) == 12
    assert Counter(_layer(h) for h in res.hits) == dict.fromkeys(range(1, 7), 2)
    steps = [s for s in res.trace if s.name.startswith("layer")]
    assert [s.detail["layer"] for s in steps] == [1, 2, 3, 4, 5, 6]
    assert all(s.detail["fetched"] == 2 and "partial" not in s.detail and s.ms >= 0 for s in steps)
    # later layers had to search deeper than k to get past what earlier layers took
    assert steps[-1].detail["k_grew_to"] > 2
    assert [s.name for s in res.trace][0] == "encode-query"  # one shared forward pass, before every layer


def test_uneven_budgets_and_the_default_even_split(fetchhr) -> None:
    res = fetchhr.search(QUERY, k=9, layers="1,3,6", k_per_layer="1,3,5")
    assert Counter(_layer(h) for h in res.hits) == {1: 1, 3: 3, 6: 5}
    res = fetchhr.search(QUERY, k=8, layers="2-3", last_share=0)
    assert Counter(_layer(h) for h in res.hits) == {2: 4, 3: 4}
    assert [h.score for h in res.hits] == sorted((h.score for h in res.hits), reverse=True)
    # the default: the last layer fetches two thirds, the earlier ones split the rest
    res = fetchhr.search(QUERY, k=12, layers="1-3")
    assert Counter(_layer(h) for h in res.hits) == {1: 2, 2: 2, 3: 8}
    assert Counter(_layer(h) for h in fetchhr.search(QUERY, k=10, layers="1-3", last_share=0.5).hits) == {1: 2, 2: 3, 3: 5}


def test_partial_result_when_the_index_runs_out(fetchhr, col: Collection) -> None:
    n = col.n_passages
    per = n // 3 + 1  # three layers ask for more than the collection holds
    res = fetchhr.search(QUERY, k=min(1000, 3 * per), layers="1-3", k_per_layer=str(per))
    ids = [h.passage_id for h in res.hits]
    assert len(ids) == n and len(set(ids)) == n  # everything, once
    steps = {s.detail["layer"]: s for s in res.trace if s.name.startswith("layer")}
    assert "partial" not in steps[1].detail and steps[1].detail["fetched"] == per
    assert "partial" in steps[3].detail and steps[3].detail["fetched"] == n - 2 * per
    assert f"only {n - 2 * per} new of the {per}" in steps[3].detail["partial"]


def test_single_layer_equals_a_plain_search_with_that_layers_vector(fetchhr, col: Collection) -> None:
    model = fetchhr.model(None)
    for layer in (1, 4):
        vec = model.query_vectors([QUERY], [layer])[layer]
        ids, sc = faiss_search(col.passage_faiss, vec, 5)
        res = fetchhr.search(QUERY, k=5, single_layer=layer)
        assert [h.passage_id for h in res.hits] == [p.id for p in col.passages_at(ids[0])]
        np.testing.assert_allclose([h.score for h in res.hits], sc[0], rtol=1e-5)
        assert {_layer(h) for h in res.hits} == {layer}
        assert [s.name for s in res.trace if s.name.startswith("layer")] == [f"layer{layer}"]


def test_model_free_last_layer_is_the_dense_baseline(fetchhr, col: Collection) -> None:
    dense = get_retriever("dense", col).search(QUERY, k=5)
    last = fetchhr.search(QUERY, k=5, single_layer=6)
    assert [h.passage_id for h in last.hits] == [h.passage_id for h in dense.hits]
    np.testing.assert_allclose([h.score for h in last.hits], [h.score for h in dense.hits], atol=1e-4)


def test_doc_level_fetches_new_documents_per_layer(fetchhr, col: Collection) -> None:
    res = fetchhr.search(QUERY, k=6, level="doc", layers="1-3", last_share=0)
    docs = [h.doc_id for h in res.hits]
    assert len(docs) == len(set(docs)) == 6
    assert Counter(_layer(h) for h in res.hits) == {1: 2, 2: 2, 3: 2}
    assert all(h.passage_id for h in res.hits)  # each document with the passage that fetched it


@pytest.mark.parametrize(
    ("params", "needle"),
    [
        ({"layers": "0"}, "layer 0 is not one"),
        ({"layers": "7"}, "layer 7 is not one"),
        ({"layers": "1-7"}, "layer 7 is not one"),
        ({"layers": ""}, "must not be empty"),
        ({"layers": ","}, "names no layer"),
        ({"layers": "x"}, "layer numbers"),
        ({"single_layer": 0}, ">= 1"),
        ({"single_layer": 7}, "heads for layers 1-6"),
        ({"k_per_layer": "0"}, "positive integer"),
        ({"k_per_layer": "1,2"}, "2 budgets for 6 layers"),
        ({"k_per_layer": "a"}, "one number or one per layer"),
    ],
)
def test_bad_layers_and_budgets_are_one_line_errors(fetchhr, params: dict, needle: str) -> None:
    with pytest.raises(BadInputError) as e:
        fetchhr.search(QUERY, k=12, **params)
    assert needle in str(e.value) and "\n" not in str(e.value)


def test_k_below_the_number_of_layers_goes_to_the_last_layers(fetchhr) -> None:
    res = fetchhr.search(QUERY, k=3, last_share=0)
    assert len(res.hits) == 3
    assert {next(iter(h.stages)) for h in res.hits} <= {"layer4", "layer5", "layer6"}
    skipped = [s for s in res.trace if s.detail.get("skipped")]
    assert [s.name for s in skipped] == ["layer1", "layer2", "layer3"]
    assert parse_k_per_layer(None, 6, 3) == [0, 0, 0, 1, 1, 1]
    assert parse_k_per_layer(None, 6, 3, 0.67) == [0, 0, 0, 0, 1, 2]
    assert parse_k_per_layer(None, 6, 1, 0.67) == [0, 0, 0, 0, 0, 1]
