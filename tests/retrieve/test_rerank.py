"""The rerank stage after any retriever (RerankRetriever), with the session's cross-encoder trained for two steps."""

from __future__ import annotations

import copy

import numpy as np
import pytest

from hiera.crossencoder import Reranker, hit_input
from hiera.errors import BadInputError
from hiera.retrieve import get_retriever
from hiera.retrieve.rerank import RerankRetriever


@pytest.fixture(scope="module")
def reranker(reranker_dir) -> Reranker:
    return Reranker(reranker_dir)


@pytest.mark.parametrize("name", ["bm25", "dhr", "hybrid"])
def test_rerank_orders_by_the_cross_encoder_and_keeps_provenance(col, reranker, name):
    base = get_retriever(name, col)
    alone = copy.copy(reranker)
    alone.weight = 1.0  # the cross-encoder alone
    rr = RerankRetriever(base, alone, depth=5)
    q = "Which piece moves in an L shape?"
    before = base.search(q, k=8)
    res = rr.search(q, k=8)
    n = len(before)  # BM25 returns only passages that share a term
    assert res.retriever == f"{name}+rerank" and len(res) == n and n > 5
    head = res.hits[:5]
    assert {h.passage_id for h in head} == {h.passage_id for h in before.hits[:5]}
    expected = reranker.score(q, [hit_input(h) for h in before.hits[:5]])
    assert [h.score for h in head] == pytest.approx(sorted(expected.tolist(), reverse=True), abs=1e-5)
    assert [h.rank for h in res.hits] == list(range(1, n + 1))
    for h in head:
        assert h.stages["rerank"].rank == h.rank and "retrieve" in h.stages and h.section_path is not None
        orig = next(b for b in before.hits if b.passage_id == h.passage_id)
        assert h.stages["retrieve"] == type(h.stages["retrieve"])(orig.score, orig.rank)
    # Beyond the depth, the base order is kept.
    assert [h.passage_id for h in res.hits[5:]] == [h.passage_id for h in before.hits[5:n]]
    assert [s.name for s in res.trace][-2:] == ["rerank", "answered-by"] and res.trace[-2].detail["depth"] == 5
    assert res.params["rerank_threshold"] == reranker.threshold


@pytest.mark.parametrize("weight", [0.0, 0.4])
def test_the_weight_mixes_the_cross_encoder_with_the_base_score(col, reranker, weight):
    base = get_retriever("hybrid", col)
    mixed = copy.copy(reranker)
    mixed.weight = weight
    q = "Which piece moves in an L shape?"
    before = base.search(q, k=6).hits
    res = RerankRetriever(base, mixed, depth=6).search(q, k=6)
    probs = reranker.score(q, [hit_input(h) for h in before])
    b = np.array([h.score for h in before])
    want = weight * probs + (1 - weight) * (b - b.min()) / (b.max() - b.min())
    by_id = {h.passage_id: w for h, w in zip(before, want, strict=True)}
    assert [h.score for h in res.hits] == pytest.approx(sorted(want.tolist(), reverse=True), abs=1e-5)
    assert all(h.score == pytest.approx(by_id[h.passage_id], abs=1e-5) for h in res.hits)
    if weight == 0.0:  # the base order stands (the base scores are distinct here)
        assert [h.passage_id for h in res.hits] == [h.passage_id for h in before]
    for h in res.hits:  # the explanation keeps the cross-encoder's own probability and rank
        assert h.stages["rerank"].score == pytest.approx(float(probs[[x.passage_id for x in before].index(h.passage_id)]), abs=1e-6)
    assert res.trace[-2].detail["weight"] == weight


def test_rerank_k_smaller_than_depth_and_doc_level(col, reranker):
    rr = RerankRetriever(get_retriever("dhr", col), reranker, depth=4)
    assert len(rr.search("Roman legions", k=2)) == 2
    docs = rr.search("Roman legions", k=3, level="doc")
    assert docs.level == "doc" and len({h.doc_id for h in docs}) == 3
    out = rr.batch_search(["Roman legions", "jazz trumpet"], k=3)
    assert [r.query for r in out] == ["Roman legions", "jazz trumpet"]


def test_bad_input(col, reranker):
    for depth in (0, 1001, 2.5):
        with pytest.raises(BadInputError, match="rerank-depth"):
            RerankRetriever(get_retriever("bm25", col), reranker, depth=depth)
    rr = RerankRetriever(get_retriever("bm25", col), reranker)
    with pytest.raises(BadInputError):
        rr.search("   ", k=3)
    with pytest.raises(BadInputError, match="ranks docs, not passages"):
        RerankRetriever(get_retriever("bm25-doc", col), reranker).search("chess", k=3, level="passage")
