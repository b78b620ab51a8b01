"""What hiera says when the Ray cluster fails it: the head lost while serving, a build step Ray could not recover.

No cluster is started here: Ray's node table and exceptions are stood in for
(tests/shard/test_multinode.py does it for real, slowly).
"""

from __future__ import annotations

import time

import pytest

pytest.importorskip("ray")

from ray.exceptions import NodeDiedError, WorkerCrashedError  # noqa: E402

import hiera.serve.ray as serve_ray  # noqa: E402
from hiera.errors import HieraError  # noqa: E402
from hiera.shard.build import placement_lines  # noqa: E402
from hiera.shard.engine import RayBuildError, ray_failure  # noqa: E402

HEAD = {"NodeID": "a" * 56, "Alive": True, "Resources": {"CPU": 1.0, "node:__internal_head__": 1.0}}
WORKER = {"NodeID": "b" * 56, "Alive": True, "Resources": {"CPU": 2.0}}


def settle(watch: serve_ray.HeadWatch, seconds: float = 2.0) -> str | None:
    """Check until the helper thread has answered (it runs the node-table call)."""
    deadline = time.monotonic() + seconds
    lost = watch.check()
    while watch._pending is not None and time.monotonic() < deadline:  # noqa: SLF001 - the test waits on it
        time.sleep(0.01)
        lost = watch.check()
    return lost


def test_head_watch(monkeypatch: pytest.MonkeyPatch) -> None:
    nodes = [HEAD, WORKER]
    monkeypatch.setattr(serve_ray, "alive_nodes", lambda: list(nodes))
    watch = serve_ray.HeadWatch(grace=0.2)
    assert watch.head == HEAD["NodeID"]
    assert settle(watch) is None
    nodes[:] = [WORKER]  # a worker lost is Serve's business, the head lost is the end of this cluster
    assert "the Ray head node aaaaaaaaaaaa is gone (the cluster was restarted)" == settle(watch)
    nodes[:] = [{**HEAD, "NodeID": "c" * 56}, WORKER]  # a new head: a new cluster
    assert "is gone" in (settle(watch) or "")


def test_head_watch_tolerates_a_slow_answer_then_gives_up(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(serve_ray, "alive_nodes", lambda: [HEAD])
    watch = serve_ray.HeadWatch(grace=0.3)

    def unreachable() -> list:
        raise ConnectionError("failed to connect to GCS at 10.0.0.1:6379\nmore")

    monkeypatch.setattr(serve_ray, "alive_nodes", unreachable)
    assert settle(watch) is None  # within the grace: one failed call is not a lost cluster
    time.sleep(0.35)
    lost = settle(watch)
    assert lost == "the Ray head does not answer (failed to connect to GCS at 10.0.0.1:6379)"


def test_a_ray_failure_is_one_line() -> None:
    for exc in (NodeDiedError("node 1f0c died\ntraceback…"), WorkerCrashedError()):
        err = ray_failure("encode", exc)
        assert isinstance(err, RayBuildError) and isinstance(err, HieraError)
        text = str(err)
        assert "\n" not in text and text.startswith("the Ray build failed during encode: ")
        assert "the live index is unchanged" in text and "rerun" in text


def test_placement_lines() -> None:
    rows = [{"task": "build_shard", "index": 0, "node_id": "1" * 56, "node_name": "w1"},
            {"task": "build_shard", "index": 1, "node_id": "", "node_name": ""},
            {"task": "encode", "texts": 120, "node_id": "2" * 56, "node_name": "w2"}]
    assert placement_lines(rows) == [
        "placement: build_shard: shard 000 on w1 (111111111111), shard 001 on ? (gone)",
        "placement: encode: 120 texts on w2 (222222222222)",
    ]
    assert placement_lines([]) == []
