"""/search?rerank=true when the server is started with a cross-encoder."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient
from helpers import tiny_questions

from hiera.serve.api import create_app
from hiera.train.args import RerankerArgs
from hiera.train.reranker import train_reranker


@pytest.fixture(scope="module")
def reranker_dir(shared_root, tmp_path_factory):
    out = tmp_path_factory.mktemp("serve-rr") / "rr"
    train_reranker(shared_root, tiny_questions(), out, RerankerArgs(max_steps=1, batch_size=4, progress=False),
                   log=lambda m: None)
    return out


def test_rerank_through_the_api(shared_root, reranker_dir):
    with TestClient(create_app(shared_root, warmup=False, reranker=reranker_dir, rerank_depth=5)) as client:
        health = client.get("/health").json()
        assert health["reranker"]["name"] == "rr" and health["reranker"]["depth"] == 5
        plain = client.get("/search", params={"q": "Which piece moves in an L shape?", "k": 3, "retriever": "bm25"}).json()
        body = client.get("/search", params={"q": "Which piece moves in an L shape?", "k": 3, "retriever": "bm25",
                                             "rerank": "true"}).json()
        assert body["retriever"] == "bm25+rerank" and plain["retriever"] == "bm25"
        assert body["trace"][-1]["name"] == "rerank"
        assert all({"retrieve", "rerank"} <= set(h["stages"]) for h in body["hits"])
        assert [h["rank"] for h in body["hits"]] == [1, 2, 3]


def test_rerank_without_a_reranker_is_a_clear_400(shared_root):
    with TestClient(create_app(shared_root, warmup=False)) as client:
        assert client.get("/health").json()["reranker"] is None
        r = client.get("/search", params={"q": "chess", "rerank": "true"})
        assert r.status_code == 400 and "without a reranker" in r.json()["detail"]
