"""A shard that does not answer: the search is refused (503), or, when the request asked for it, partial and marked.

The remote fan-out (:class:`hiera.serve.ray.RayFanOut`) is driven here by
stand-ins for Ray Serve's handles that answer from the real shards in this
process, or fail the way a dead replica or a slow one does; no Ray cluster
is started (tests/shard/test_multinode.py kills real replicas).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from shard.compare import QUERIES, assert_same

from hiera.builds import open_collection
from hiera.errors import IndexMissingError, ShardUnavailableError
from hiera.retrieve import get_retriever
from hiera.serve.api import create_app
from hiera.shard.collection import ShardedCollection
from hiera.shard.fanout import shard_calls
from hiera.shard.shard import Shard

pytest.importorskip("ray")

from ray.exceptions import ActorDiedError, RayTaskError  # noqa: E402

from hiera.serve.ray import RayFanOut  # noqa: E402

TOP_K = ("bm25", "dense", "hybrid", "dhr")


class Response:
    """What ``handle.method.remote(...)`` returns: ``result(timeout_s)`` like Serve's DeploymentResponse."""

    def __init__(self, fn: Any, mode: str) -> None:
        self.fn, self.mode, self.cancelled, self.waits = fn, mode, False, []

    def result(self, timeout_s: float | None = None) -> Any:
        self.waits.append(timeout_s)
        if self.mode == "dead":
            raise ActorDiedError()
        if self.mode == "stalled":
            time.sleep(min(timeout_s or 0.0, 0.05))
            raise TimeoutError("timed out")
        if self.mode == "raises":
            try:
                self.fn()
            except Exception as e:  # noqa: BLE001 - wrapped the way Ray wraps a task's own error
                raise RayTaskError("ShardServer.rows", "traceback", e).as_instanceof_cause() from None
        return self.fn()

    def cancel(self) -> None:
        self.cancelled = True


class Handle:
    """A shard deployment's handle answering from a real in-process shard, or failing like a lost replica."""

    def __init__(self, shard: Shard, mode: str = "ok") -> None:
        self.shard, self.mode, self.sent = shard, mode, []

    def __getattr__(self, method: str) -> Any:
        handle = self

        class Method:
            def remote(self, *a: Any) -> Response:
                r = Response(lambda: getattr(handle.shard, method)(*a), handle.mode)
                handle.sent.append(r)
                return r

        return Method()


def remote_collection(root: Path, modes: dict[str, str] | None = None, **fan: Any) -> tuple[ShardedCollection, list]:
    local = open_collection(root)
    assert isinstance(local, ShardedCollection)
    shards = [Shard(local.view.build_dir, e, local.manifest.corpus_version) for e in local.manifest.shards]
    handles = [Handle(s, (modes or {}).get(s.name, "ok")) for s in shards]
    fanout = RayFanOut(handles, local.view.build_dir, [s.name for s in shards], **fan)
    return ShardedCollection(root, fanout=fanout), handles


def shard_of_docs(col: ShardedCollection) -> dict[str, str]:
    """doc id -> the name of the shard holding it."""
    by_row = {d.rowid: d.id for d in col.store.iter_docs()}
    rows = col.view.doc_rows
    return {by_row[int(rows[i])]: e["name"] for e in col.manifest.shards for i in range(*e["docs"])}


def test_every_shard_answering_is_exact(sharded3: Path) -> None:
    remote, _ = remote_collection(sharded3)
    local = open_collection(sharded3)
    for name in (*TOP_K, "bm25-dhr"):
        for q in QUERIES[:3]:
            assert_same(get_retriever(name, local).search(q, k=10).hits, get_retriever(name, remote).search(q, k=10).hits,
                        f"{name} {q!r}")


@pytest.mark.parametrize("mode", ["dead", "stalled"])
def test_a_missing_shard_refuses_the_search(sharded3: Path, mode: str) -> None:
    remote, _ = remote_collection(sharded3, {"001": mode}, timeout=0.2)
    for name in TOP_K:
        with pytest.raises(ShardUnavailableError) as err:
            get_retriever(name, remote).search(QUERIES[0], k=10)
        assert err.value.shards == ["001"]
        assert "shard 001 of the sharded index did not answer" in str(err.value)
        assert ("no answer within" if mode == "stalled" else "ActorDiedError") in str(err.value)
        assert "\n" not in str(err.value)


def test_partial_results_leave_out_only_the_missing_shard(sharded3: Path) -> None:
    remote, _ = remote_collection(sharded3, {"001": "dead"})
    local = open_collection(sharded3)
    owner = shard_of_docs(local)
    assert {"000", "001", "002"} == set(owner.values())
    for name in ("bm25", "dense"):
        for q in QUERIES:
            with shard_calls(partial=True) as calls:
                got = get_retriever(name, remote).search(q, k=5, level="passage")
            assert set(calls.missing) == {"001"}
            # exactly the complete ranking without shard 001's hits: nothing else moved
            full = get_retriever(name, local).search(q, k=200, level="passage").hits
            want = [h for h in full if owner[h.doc_id] != "001"][:5]
            assert [(h.passage_id, round(h.score, 5)) for h in want] == \
                [(h.passage_id, round(h.score, 5)) for h in got.hits], f"partial {name} {q!r}"
    for name in ("hybrid", "dhr"):
        with shard_calls(partial=True) as calls:
            got = get_retriever(name, remote).search(QUERIES[0], k=10)
        assert set(calls.missing) == {"001"} and got.hits
        assert all(owner[h.doc_id] != "001" for h in got.hits)


def test_partial_is_refused_where_every_shard_is_needed(sharded3: Path) -> None:
    remote, _ = remote_collection(sharded3, {"002": "dead"})
    with shard_calls(partial=True), pytest.raises(ShardUnavailableError, match="every shard's rows or scores"):
        remote.bm25_docs.scores(QUERIES[0])  # a full score vector (entity linking's): no shard may be left out
    # bm25-dhr scores only its candidates' passages (Bm25Index.scores_at): the live shards' documents, so it can be
    # partial, and says so
    with shard_calls(partial=True) as calls:
        got = get_retriever("bm25-dhr", remote).search(QUERIES[0], k=5)
    assert set(calls.missing) == {"002"} and got.hits
    everything_down, _ = remote_collection(sharded3, {"000": "dead", "001": "dead", "002": "dead"})
    with shard_calls(partial=True), pytest.raises(ShardUnavailableError, match="no shard answered"):
        get_retriever("bm25", everything_down).search(QUERIES[0], k=5)


def test_a_failed_shard_is_probed_briefly_until_it_answers(sharded3: Path) -> None:
    remote, handles = remote_collection(sharded3, {"001": "stalled"}, timeout=0.3, probe_timeout=0.05)
    r = get_retriever("bm25", remote)
    with pytest.raises(ShardUnavailableError):
        r.search(QUERIES[0], k=5)
    assert handles[1].sent[-1].waits[-1] == pytest.approx(0.3, abs=0.05)
    assert handles[1].sent[-1].cancelled
    with pytest.raises(ShardUnavailableError):
        r.search(QUERIES[0], k=5)
    assert handles[1].sent[-1].waits[-1] <= 0.05  # suspect: no full wait behind a shard known to be down
    handles[1].mode = "ok"
    assert r.search(QUERIES[0], k=5).hits
    handles[1].mode = "stalled"  # it answered, so it gets the full wait again
    with pytest.raises(ShardUnavailableError):
        r.search(QUERIES[0], k=5)
    assert handles[1].sent[-1].waits[-1] == pytest.approx(0.3, abs=0.05)


def test_a_request_deadline_bounds_the_wait(sharded3: Path) -> None:
    remote, handles = remote_collection(sharded3, {"000": "stalled"}, timeout=10.0)
    with shard_calls(timeout=0.1), pytest.raises(ShardUnavailableError):
        get_retriever("bm25", remote).search(QUERIES[0], k=5)
    assert handles[0].sent[-1].waits[-1] <= 0.1


def test_a_shards_own_error_is_raised_as_in_one_process(sharded3: Path) -> None:
    remote, handles = remote_collection(sharded3)
    handles[2].mode = "raises"
    handles[2].shard.manifest.models = {}  # this shard now says it has no dense index
    with pytest.raises(IndexMissingError, match="shard 002 .* has no dense index"):
        get_retriever("dense", remote).search(QUERIES[0], k=5)


# -- over HTTP ------------------------------------------------------------------------------------------------
def app_over(root: Path, modes: dict[str, str] | None = None) -> TestClient:
    def opener(path: Path, **kw: Any) -> ShardedCollection:
        return remote_collection(path, modes, timeout=0.5)[0]

    return TestClient(create_app(root, warmup=False, api_key="", opener=opener))


def test_http_503_names_the_shard_and_partial_is_marked(sharded3: Path) -> None:
    with app_over(sharded3, {"001": "dead"}) as client:
        for path in ("/search",):
            r = client.get(path, params={"q": QUERIES[0], "retriever": "dhr"})
            assert r.status_code == 503 and r.headers["Retry-After"]
            body = r.json()
            assert body["missing_shards"] == ["001"] and body["detail"].startswith("shard 001 of the sharded index")
            assert "partial=true" in body["detail"]
        r = client.get("/search", params={"q": QUERIES[0], "retriever": "dhr", "partial": "true"})
        assert r.status_code == 200
        body = r.json()
        assert body["partial"] is True and body["missing_shards"] == ["001"] and body["hits"]
        step = [s for s in body["trace"] if s["name"] == "partial"]
        assert step and step[0]["detail"]["missing_shards"] == ["001"]
        r = client.get("/search", params={"q": QUERIES[0], "retriever": "bm25-dhr", "partial": "true"})
        assert r.status_code == 200 and r.json()["partial"] is True  # it scores only the live shards' candidates
    with app_over(sharded3) as client:
        r = client.get("/search", params={"q": QUERIES[0], "partial": "true"})
        assert r.status_code == 200 and r.json()["partial"] is False and r.json()["missing_shards"] == []
        plain = client.get("/search", params={"q": QUERIES[0]}).json()
        assert "partial" not in plain and "missing_shards" not in plain  # unchanged unless asked


def test_partial_is_a_documented_request_parameter(unsharded: Path) -> None:
    with TestClient(create_app(unsharded, warmup=False, api_key="")) as client:
        schema = client.get("/openapi.json").json()
        for path in ("/search", "/answer"):
            params = {p["name"]: p for p in schema["paths"][path]["get"]["parameters"]}
            assert params["partial"]["schema"]["type"] == "boolean" or "anyOf" in params["partial"]["schema"]
            assert "missing_shards" in params["partial"]["description"]
        # one process, one index: nothing can go missing, and the answer says so when asked
        r = client.get("/search", params={"q": QUERIES[0], "partial": "true"})
        assert r.status_code == 200 and r.json()["partial"] is False
        assert client.get("/search", params={"q": QUERIES[0], "partial": "maybe"}).status_code == 422
