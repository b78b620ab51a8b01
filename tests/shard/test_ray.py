"""The Ray engine: a 3-shard build with Ray tasks and Ray Data, and Ray Serve's HTTP endpoint, both exact.

Needs the ``ray`` extra (skipped without it); one local Ray head serves the
whole module (see conftest.py).
"""

from __future__ import annotations

import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from shard.compare import QUERIES, assert_same, get_json

from hiera.builds import open_collection
from hiera.retrieve import get_retriever
from hiera.shard.collection import ShardedCollection

pytest.importorskip("ray")

METHODS = ("bm25", "bm25-doc", "dense", "dhr", "hybrid")
CASES = [(m, lv) for m in METHODS for lv in ("passage", "doc") if not (m == "bm25-doc" and lv == "passage")]


def test_ray_build_is_sharded_and_exact(unsharded: Path, ray3: Path) -> None:
    col = open_collection(ray3)
    assert isinstance(col, ShardedCollection) and len(col.manifest.shards) == 3
    one = open_collection(unsharded)
    assert col.manifest.passages == one.manifest.passages and col.manifest.models == one.manifest.models
    for name, level in CASES:
        for q in QUERIES:
            a = get_retriever(name, one).search(q, k=10, level=level)
            b = get_retriever(name, col).search(q, k=10, level=level)
            assert_same(a.hits, b.hits, f"ray build {name} {level} {q!r}")


@pytest.fixture(scope="module")
def served(ray3: Path, ray_head: dict) -> Any:
    from ray import serve

    from hiera.serve.ray import deploy

    url = deploy(ray3, port=ray_head["http_port"], shard_cpus=0, router_cpus=0, app_options={"api_key": ""},
                 name="hiera-test")
    deadline = time.monotonic() + 120
    while True:
        try:
            status, body = get_json(url + "health", timeout=5)
            if status == 200 and body.get("warm"):
                break
        except OSError:
            pass
        assert time.monotonic() < deadline, "Ray Serve did not come up in 120 s"
        time.sleep(0.5)
    yield url
    serve.delete("hiera-test")


def test_ray_serve_http_answers_like_one_process(unsharded: Path, served: str) -> None:
    from fastapi.testclient import TestClient

    from hiera.serve.api import create_app

    with TestClient(create_app(unsharded, warmup=False, api_key="")) as one:
        for name, level in CASES:
            for q in QUERIES[:3]:
                params = {"q": q, "retriever": name, "level": level, "k": 10}
                a = one.get("/search", params=params)
                status, b = get_json(served + "search?" + urllib.parse.urlencode(params))
                assert a.status_code == status == 200, b
                assert_same(a.json()["hits"], b["hits"], f"ray serve {name} {level} {q!r}")
                assert set(a.json()) == set(b)
        assert one.get("/methods").json() == get_json(served + "methods")[1]
        status, body = get_json(served + "search?" + urllib.parse.urlencode({"q": "x", "retriever": "nope"}))
        assert status == one.get("/search", params={"q": "x", "retriever": "nope"}).status_code
        assert body["detail"].startswith("unknown retriever 'nope'")
