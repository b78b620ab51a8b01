"""When a change to a sharded collection reaches Ray Serve: a removal at once, a change that adds text on redeploy.

A removal links the shards into the new build unchanged (tombstones at its
top), so the router serves it over the deployed shard replicas without a
redeploy; a change that adds text rebuilds the shards, and the router refuses
it in one line until the application is redeployed. The router and the shard
server are plain classes: their checks are tested here without Ray; one test
drives the whole thing over HTTP on the session's local Ray head.
"""

from __future__ import annotations

import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import helpers
import numpy as np
import pytest
from shard.compare import assert_same, get_json

from hiera.builds import open_collection, remove_documents, update_collection
from hiera.corpus.ingest import ingest
from hiera.corpus.tree import Document
from hiera.errors import HieraError, ManifestMismatchError
from hiera.index.manifest import Manifest
from hiera.index.publish import live_build_dir
from hiera.retrieve import get_retriever
from hiera.serve.ray import Router, ShardServer

REMOVED = "chess"
QUERY = "the knight on the chessboard"  # the removed document is its best match before the removal
METHODS = ("bm25", "dense", "hybrid", "dhr")
K = 5


def _remove(root: Path) -> None:
    """Remove one document as ``hiera remove`` does (``compact_at=1``: 8 documents would otherwise compact)."""
    remove_documents(root, [REMOVED], log=helpers.QUIET, compact_at=1.0, progress=False)


def _add(root: Path) -> None:
    """Add a document with new text as ``hiera add`` does: ingest, the build published inside its transaction."""
    doc = Document(id="glaciers", title="Glacier",
                   lead=["A glacier is a persistent body of dense ice that moves slowly under its own weight."])
    src = helpers.write_jsonl(root.parent / "added.jsonl", [doc])
    ingest([src], "hiera-jsonl", root, progress=False,
           before_commit=lambda st: update_collection(root, st, log=helpers.QUIET, progress=False))


def _router(root: Path) -> Router:
    """A router over the live build, its shard handles stand-ins (opening the collection calls no shard)."""
    build_dir = live_build_dir(root)
    assert build_dir is not None
    m = Manifest.read(build_dir)
    return Router(str(root), str(build_dir), [object()] * len(m.shards), {},
                  {"names": [e["name"] for e in m.shards]})


def test_router_serves_a_removal_and_refuses_new_shards(sharded3_copy: Path) -> None:
    root = sharded3_copy
    router = _router(root)
    deployed = router.build_dir
    with router._open(root) as col:  # let go before the removal, which may then delete the deployed build
        assert col.view.build_dir == deployed
    _remove(root)
    after = live_build_dir(root)
    assert after is not None and after != deployed and not deployed.exists()  # the deployed build was removed
    m = Manifest.read(after)
    assert m.base_version == router.base_version and m.shards == router.shards  # the removal kept the shards
    col = router._open(root)
    assert col.view.build_dir == after and col.fanout.build_dir == after
    assert col.live is not None and col.dead_docs.size == 1  # searches there mask the removed document
    _add(root)
    rebuilt = live_build_dir(root)
    assert rebuilt is not None and Manifest.read(rebuilt).shards != router.shards
    with pytest.raises(HieraError) as e:
        router._open(root)
    assert "\n" not in str(e.value) and "has other shards" in str(e.value) and "redeploy" in str(e.value)


def test_restarted_shard_replica_opens_its_shard_from_the_live_build(sharded3_copy: Path) -> None:
    root = sharded3_copy
    deployed = live_build_dir(root)
    assert deployed is not None
    m = Manifest.read(deployed)
    entry = m.shards[1]
    _remove(root)
    assert not deployed.exists()
    with pytest.raises(HieraError):  # without the collection, the removed build cannot be opened
        ShardServer(str(deployed), entry, m.base_version)
    server = ShardServer(str(deployed), entry, m.base_version, root=str(root))
    local = open_collection(root).fanout.shards[1]
    assert server.shard.build_dir == live_build_dir(root)
    rows = server.row_range("passages", 0, 2)
    assert np.array_equal(rows, local.row_range("passages", 0, 2)) and rows.shape[0] == 2
    q = rows[:1].astype(np.float32)
    (ia, sa), (ib, sb) = server.faiss_search("passages", q, K), local.faiss_search("passages", q, K)
    assert ia.tolist() == ib.tolist() and ia[0][0] == 0 and np.allclose(sa, sb)
    _add(root)  # new shards: the deployed entry no longer matches the live build's shard
    with pytest.raises(ManifestMismatchError):
        ShardServer(str(deployed), entry, m.base_version, root=str(root))


# -- over HTTP, on the session's Ray head ------------------------------------------------------------------------------
def _search(url: str, method: str) -> tuple[int, Any]:
    return get_json(url + "search?" + urllib.parse.urlencode({"q": QUERY, "retriever": method, "k": K}))


def _until(what: str, check: Any, seconds: float = 10.0) -> Any:
    """Poll ``check()`` until it returns something true, for at most ``seconds``; returns it."""
    deadline = time.monotonic() + seconds
    while True:
        out = check()
        if out:
            return out
        assert time.monotonic() < deadline, f"{what} not within {seconds:.0f} s"
        time.sleep(0.2)


@pytest.fixture
def served_copy(sharded3_copy: Path, ray_head: dict) -> Iterator[tuple[Path, str]]:
    """A private copy of the 3-shard collection deployed on Ray Serve (its own app, deleted afterwards)."""
    from ray import serve

    from hiera.serve.ray import deploy

    name = "hiera-updates"
    url = deploy(sharded3_copy, port=ray_head["http_port"], shard_cpus=0, router_cpus=0, app_options={"api_key": ""},
                 name=name)
    try:
        def warm() -> bool:
            try:
                status, body = get_json(url + "health", timeout=5)
            except OSError:
                return False
            return status == 200 and bool(body.get("warm"))

        _until("Ray Serve up", warm, 120.0)
        yield sharded3_copy, url
    finally:
        serve.delete(name)


def test_ray_serve_shows_a_removal_without_redeploy_and_refuses_new_text(served_copy: tuple[Path, str]) -> None:
    root, url = served_copy
    for method in METHODS:
        status, body = _search(url, method)
        assert status == 200, body
        assert REMOVED in {h["doc_id"] for h in body["hits"]}, method  # the test would see the removal

    _remove(root)
    after = live_build_dir(root)
    assert after is not None

    def removal_searched() -> bool:  # searches alone (no /health) pick the change up: never a 500 meanwhile
        status, body = _search(url, "bm25")
        assert status == 200, body
        return REMOVED not in {h["doc_id"] for h in body["hits"]}

    _until("the removal's build served to a search", removal_searched)
    assert get_json(url + "health")[1].get("build") == after.name
    local = open_collection(root)
    for method in METHODS:
        status, body = _search(url, method)
        assert status == 200, body
        assert REMOVED not in {h["doc_id"] for h in body["hits"]}, method
        expected = get_retriever(method, local).search(QUERY, k=K).hits
        assert len(body["hits"]) == len(expected) and (method == "bm25" or len(expected) == K), method
        assert_same(expected, body["hits"], f"ray serve after a removal, {method}")

    _add(root)
    status, body = _until("a refusal of the rebuilt shards", lambda: (r := _search(url, "dense"))[0] == 503 and r)
    assert "redeploy" in body["detail"] and "\n" not in body["detail"], body
