"""/search?rerank=true when the server is started with a cross-encoder."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from hiera.crossencoder import Reranker
from hiera.retrieve import get_retriever
from hiera.retrieve.rerank import RerankRetriever
from hiera.serve.api import create_app

QUERY = "Which piece moves in an L shape?"


def test_rerank_through_the_api(shared_root, col, reranker_dir):
    with TestClient(create_app(shared_root, warmup=False, reranker=reranker_dir, rerank_depth=5)) as client:
        health = client.get("/health").json()
        assert health["reranker"]["name"] == "rr" and health["reranker"]["depth"] == 5
        plain = client.get("/search", params={"q": QUERY, "k": 5, "retriever": "bm25"}).json()
        body = client.get("/search", params={"q": QUERY, "k": 3, "retriever": "bm25", "rerank": "true"}).json()
    assert body["retriever"] == "bm25+rerank" and plain["retriever"] == "bm25"
    assert [s["name"] for s in body["trace"]][-2:] == ["rerank", "answered-by"]
    hits = body["hits"]
    assert [h["rank"] for h in hits] == [1, 2, 3]
    # ordered by the reranked score: the cross-encoder's probability mixed with bm25's score at the fitted weight
    w = health["reranker"]["weight"]
    assert 0.0 <= w <= 1.0 and body["trace"][-2]["detail"]["weight"] == w
    scores = [h["score"] for h in hits]
    assert scores == sorted(scores, reverse=True)
    base = [h["score"] for h in plain["hits"]]
    lo, span = min(base), max(base) - min(base)
    for h in hits:
        want = w * h["stages"]["rerank"]["score"] + (1 - w) * (h["stages"]["retrieve"]["score"] - lo) / span
        assert h["score"] == pytest.approx(want, abs=1e-5)
    # the retrieve stage keeps each hit's score and rank in bm25's own top 5 (the rerank depth)
    before = {h["passage_id"]: (h["score"], h["rank"]) for h in plain["hits"]}
    for h in hits:
        score, rank = before[h["passage_id"]]
        assert h["stages"]["retrieve"]["rank"] == rank and h["stages"]["retrieve"]["score"] == pytest.approx(score)
    # the same hits the Python pipeline returns
    ours = RerankRetriever(get_retriever("bm25", col), Reranker(reranker_dir), depth=5).search(QUERY, k=3)
    assert [h["passage_id"] for h in hits] == [h.passage_id for h in ours.hits]
    assert scores == pytest.approx([h.score for h in ours.hits], abs=1e-6)


def test_rerank_without_a_reranker_is_a_clear_422(shared_root):
    with TestClient(create_app(shared_root, warmup=False)) as client:
        assert client.get("/health").json()["reranker"] is None
        r = client.get("/search", params={"q": "chess", "rerank": "true"})
        assert r.status_code == 422 and "without a reranker" in r.json()["detail"]
