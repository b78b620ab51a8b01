"""The rerank stage after any retriever, with a cross-encoder trained for two steps."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import tiny_questions

from hiera.collection import Collection
from hiera.errors import BadInputError, HieraError
from hiera.rerank import Reranker, RerankRetriever, hit_input
from hiera.retrieve import get_retriever
from hiera.train.args import RerankerArgs
from hiera.train.reranker import train_reranker


@pytest.fixture(scope="module")
def reranker(shared_root, tmp_path_factory) -> Reranker:
    out = tmp_path_factory.mktemp("rerank") / "rr"
    train_reranker(
        shared_root,
        tiny_questions(),
        out,
        RerankerArgs(max_steps=2, batch_size=4, progress=False),
        log=lambda m: None,
    )
    return Reranker(out)


@pytest.mark.parametrize("name", ["bm25", "dhr", "hybrid"])
def test_rerank_orders_by_the_cross_encoder_and_keeps_provenance(shared_root, reranker, name):
    col = Collection(shared_root)
    base = get_retriever(name, col)
    rr = RerankRetriever(base, reranker, depth=5)
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
    assert res.trace[-1].name == "rerank" and res.trace[-1].detail["depth"] == 5
    assert res.params["rerank_threshold"] == reranker.threshold


def test_rerank_k_smaller_than_depth_and_doc_level(shared_root, reranker):
    col = Collection(shared_root)
    rr = RerankRetriever(get_retriever("dhr", col), reranker, depth=4)
    assert len(rr.search("Roman legions", k=2)) == 2
    docs = rr.search("Roman legions", k=3, level="doc")
    assert docs.level == "doc" and len({h.doc_id for h in docs}) == 3
    out = rr.batch_search(["Roman legions", "jazz trumpet"], k=3)
    assert [r.query for r in out] == ["Roman legions", "jazz trumpet"]


def test_bad_input(shared_root, reranker, tmp_path):
    col = Collection(shared_root)
    with pytest.raises(BadInputError, match="rerank-depth"):
        RerankRetriever(get_retriever("bm25", col), reranker, depth=0)
    rr = RerankRetriever(get_retriever("bm25", col), reranker)
    with pytest.raises(BadInputError):
        rr.search("   ", k=3)
    with pytest.raises(HieraError):
        Reranker(tmp_path / "missing")
    assert np.all((reranker.score("q", ["a", "b"]) >= 0) & (reranker.score("q", ["a", "b"]) <= 1))
