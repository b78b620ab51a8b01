"""FetchHR's retriever: exclusion across layers, single-layer mode, budgets, errors (its package: tests/fetchhr/)."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from helpers import TOPIC_QUERIES

from hiera.collection import Collection
from hiera.errors import BadInputError
from hiera.fetchhr.exclude import fetch_new
from hiera.fetchhr.layers import parse_k_per_layer
from hiera.index.dense import build_faiss, faiss_module, faiss_search
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
    assert skipped[0].detail["skipped"].startswith("k=3 split evenly over 6 layers leaves the earlier ones none")
    # the default split: the last layer's share leaves the earlier layers too few for every one of them
    res = fetchhr.search(QUERY, k=10)
    skipped = [s for s in res.trace if s.detail.get("skipped")]
    assert [s.name for s in skipped] == ["layer1", "layer2"]
    assert skipped[0].detail["skipped"].startswith(
        "k=10 split by last_share=0.67: the last layer fetches 7, and the 5 layers before it share 3")
    assert parse_k_per_layer(None, 6, 3) == [0, 0, 0, 1, 1, 1]
    assert parse_k_per_layer(None, 6, 3, 0.67) == [0, 0, 0, 0, 1, 2]
    assert parse_k_per_layer(None, 6, 1, 0.67) == [0, 0, 0, 0, 0, 1]


# -- one ranking of the union, one batched search ---------------------------------------------------
@pytest.fixture(scope="module")
def position(col: Collection) -> dict[str, int]:
    """Passage id → its row in the vector matrix."""
    return {p.id: i for i, p in enumerate(col.passages_at(list(range(col.n_passages))))}


def test_the_union_is_ranked_by_the_encoders_own_vector(fetchhr, col: Collection, position) -> None:
    own = col.passage_encoder.encode_query(QUERY)  # model-free: the final layer's mean pooling is dense's vector
    res = fetchhr.search(QUERY, k=12, k_per_layer="2")
    pos = np.asarray([position[h.passage_id] for h in res.hits])
    np.testing.assert_allclose([h.score for h in res.hits], col.passage_scores(pos, own), atol=1e-4)
    assert [h.score for h in res.hits] == sorted((h.score for h in res.hits), reverse=True)
    assert [h.rank for h in res.hits] == list(range(1, 13))
    # the first layers no longer come first: the list interleaves the layers
    assert [_layer(h) for h in res.hits] != sorted(_layer(h) for h in res.hits)
    # rank=layer: the same set, in the order of each layer's own score
    by_layer = fetchhr.search(QUERY, k=12, k_per_layer="2", rank="layer")
    assert {h.passage_id for h in by_layer.hits} == {h.passage_id for h in res.hits}
    assert [h.score for h in by_layer.hits] == [h.stages[f"layer{_layer(h)}"].score for h in by_layer.hits]
    steps = {s.name: s for s in res.trace}
    assert steps["rank"].detail == {"by": "encoder", "candidates": 12}


def test_each_hit_keeps_its_layer_score_and_rank_there(fetchhr, col: Collection, position) -> None:
    res = fetchhr.search(QUERY, k=12, k_per_layer="2")
    vecs = fetchhr.model(None).query_vectors([QUERY], list(range(1, 7)))
    ranks: dict[int, list[int]] = {}
    for h in res.hits:
        n = _layer(h)
        stage = h.stages[f"layer{n}"]
        own_score = col.passage_scores(np.asarray([position[h.passage_id]]), vecs[n][0])[0]
        assert stage.score == pytest.approx(float(own_score), abs=1e-4)
        ranks.setdefault(n, []).append(stage.rank)
    assert {n: sorted(r) for n, r in ranks.items()} == dict.fromkeys(range(1, 7), [1, 2])


def test_the_default_split_puts_denses_top_first(fetchhr, col: Collection) -> None:
    # the last layer queries with the encoder's own vector and fetches 8 of 12 after the others took theirs, so the
    # union holds dense's top 8, and ranked by that same vector its first 8 are dense's
    dense = get_retriever("dense", col).search(QUERY, k=8)
    res = fetchhr.search(QUERY, k=12, layers="1-3")
    assert [h.passage_id for h in res.hits[:8]] == [h.passage_id for h in dense.hits]
    np.testing.assert_allclose([h.score for h in res.hits[:8]], [h.score for h in dense.hits], atol=1e-4)


def test_one_batched_search_serves_every_layer(fetchhr, col: Collection) -> None:
    res = fetchhr.search(QUERY, k=12, k_per_layer="2")
    names = [s.name for s in res.trace]
    assert names == ["encode-query", "heads", "search", *[f"layer{n}" for n in range(1, 7)], "rank",
                     "answered-by"]
    search = res.trace[2]
    assert search.detail["queries"] == 6 and search.detail["depth"] == 12
    assert all(s.detail["searches"] == 0 for s in res.trace if s.name.startswith("layer"))  # exact: no re-search


def _synthetic(n: int = 400, d: int = 16, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    v = rng.standard_normal((n, d)).astype(np.float32)
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    q = rng.standard_normal((5, d)).astype(np.float32)
    # correlated queries, so that later layers find their best passages already taken
    q = 0.6 * q[:1] + 0.4 * q
    return v, q / np.linalg.norm(q, axis=1, keepdims=True)


@pytest.mark.parametrize("factory", ["Flat", "HNSW16", "IVF8,Flat"])
def test_batched_exclusion_equals_layer_after_layer(factory: str) -> None:
    from hiera.fetchhr.exclude import fetch_layers

    v, q = _synthetic()
    index = build_faiss(v, factory)
    budgets, layers = [3, 5, 2, 7, 4], [1, 2, 3, 4, 5]
    seen: set[int] = set()
    one_by_one = [fetch_new(index, q[i], b, seen, layer=n) for i, (n, b) in enumerate(zip(layers, budgets, strict=True))]
    batched = fetch_layers(index, q, budgets, layers)
    for a, b in zip(one_by_one, batched, strict=True):
        assert a.layer == b.layer and list(a.positions) == list(b.positions)
        np.testing.assert_allclose(a.scores, b.scores, rtol=1e-6)
    flat = [int(p) for f in batched for p in f.positions]
    assert len(flat) == sum(budgets) == len(set(flat))
    if factory == "Flat":
        assert all(f.searches == 0 and f.depth == sum(budgets) for f in batched)


def test_a_layer_left_short_searches_again_alone() -> None:
    from hiera.fetchhr.exclude import fetch_layers

    # passages: Σk rows always hold each layer's k new ones; documents of 50 passages do not (the shared depth
    # is 4 rows per document wanted), so the later layers search again, alone and deeper
    v, q = _synthetic(n=2000)
    keys = np.arange(len(v)) // 50
    v = v[keys] + 0.2 * v  # a document's passages near one another: its rows crowd the top of a search
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    index = build_faiss(v, "Flat")
    got = fetch_layers(index, q[:3], [3, 3, 3], [1, 2, 3], keys=keys)
    docs = [int(keys[p]) for f in got for p in f.positions]
    assert len(docs) == 9 == len(set(docs))
    assert any(f.searches > 0 and f.depth > 36 for f in got)
    seen: set[int] = set()
    one_by_one = [fetch_new(index, q[i], 3, seen, keys, layer=i + 1) for i in range(3)]
    assert [list(f.positions) for f in one_by_one] == [list(f.positions) for f in got]


def test_an_ivf_list_that_runs_dry_is_partial_without_searching_again() -> None:
    from hiera.fetchhr.exclude import fetch_layers

    v, q = _synthetic(n=2000)
    index = build_faiss(v, "IVF16,Flat")
    faiss_module().extract_index_ivf(index).nprobe = 1  # one list of ~125 vectors; the shared depth is 200
    reach = [int((faiss_search(index, q[i], 2000)[0] >= 0).sum()) for i in range(2)]
    got = fetch_layers(index, q[:2], [100, 100], [1, 2])
    assert all(f.searches == 0 for f in got)
    assert len(got[0].positions) == min(100, reach[0])
    assert got[1].partial and len(got[1].positions) < 100
    flat = [int(p) for f in got for p in f.positions]
    assert len(flat) == len(set(flat))


def test_batched_exclusion_at_document_level_takes_new_documents() -> None:
    from hiera.fetchhr.exclude import fetch_layers, shared_depth

    v, q = _synthetic()
    keys = np.arange(len(v)) // 4  # four passages per document
    index = build_faiss(v, "Flat")
    got = fetch_layers(index, q[:3], [2, 2, 2], [1, 2, 3], keys=keys)
    docs = [int(keys[p]) for f in got for p in f.positions]
    assert len(docs) == 6 == len(set(docs))
    assert shared_depth([2, 2, 2], len(v), documents=True) == 24
    assert shared_depth([300, 300], 100) == 100  # never deeper than the index
