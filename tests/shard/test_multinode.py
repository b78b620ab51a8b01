"""A real multi-node Ray cluster on this machine: placement over nodes, and the three faults of bench/ray_faults.py.

A head and two worker nodes, each its own ``ray start`` (node id, CPUs, object
store, temp dir), started once for the module and always stopped. The trials
are bench/ray_faults.py's, with fewer repetitions than the benchmark: a worker
node killed during ``hiera build --shards 3 --engine ray``, a shard replica
killed while ``hiera serve --engine ray`` is under load, the head restarted.
Slow (minutes each on 2 cores): run with HIERA_SLOW=1.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

pytest.importorskip("ray")

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def monkeypatch_module() -> Iterator[pytest.MonkeyPatch]:
    with pytest.MonkeyPatch.context() as mp:
        mp.syspath_prepend(str(REPO))  # the trials are bench/ray_faults.py's
        yield mp


@pytest.fixture(scope="module")
def cluster(monkeypatch_module: pytest.MonkeyPatch) -> Iterator[object]:
    from bench.ray_cluster import LocalRayCluster

    c = LocalRayCluster(2, worker_cpus=2, object_store_mb=200)
    c.start()
    try:
        yield c
    finally:
        c.stop()


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory, monkeypatch_module: pytest.MonkeyPatch) -> Path:
    w = tmp_path_factory.mktemp("rayfaults")
    (w / "cache").mkdir()
    monkeypatch_module.setenv("HIERA_CACHE_DIR", str(w / "cache"))
    return w


def test_nodes_are_separate(cluster: object) -> None:
    nodes = cluster.alive_nodes()  # type: ignore[attr-defined]
    assert sorted(n["name"] for n in nodes) == ["head", "w1", "w2"]
    assert len({n["id"] for n in nodes}) == 3
    for n in nodes:
        assert n["resources"]["object_store_memory"] == 200 * 1024 * 1024
        assert n["resources"][f"hiera_node_{n['name']}"] == 1


def test_a_node_killed_during_a_build(cluster: object, work: Path) -> None:
    from bench.ray_faults import build_trials

    row = build_trials(cluster, work, n=2, docs=40, seed=1)  # type: ignore[arg-type]
    assert row["outcome"] == "pass", row["details"]
    assert row["killed"] >= 1
    # the clean build spread its shard tasks over more than one node (its encoding too, unless an actor started
    # too late to get a batch: Ray Data hands batches to whichever actor is ready)
    assert len(set(row["clean_placement"]["build_shard"])) >= 2, row["clean_placement"]
    assert row["clean_placement"]["encode"], row["clean_placement"]


def test_a_replica_killed_under_load(cluster: object, work: Path, data_dir: Path) -> None:
    from bench.ray_faults import replica_trials

    row = replica_trials(cluster, work, n=1, clients=3, seed=0, window=20.0)  # type: ignore[arg-type]
    assert row["wrong"] == 0 and row["other"] == 0, row["details"]
    assert row["complete"] > 0 and row["outcome"] == "pass"
    nodes = {line.split(" on node ")[1].split(" ")[0] for line in row["placement"]}
    assert len(nodes) >= 2, row["placement"]  # the shard replicas are not all on one node


def test_the_head_restarted(cluster: object, work: Path, data_dir: Path) -> None:
    from bench.ray_faults import head_trials

    row = head_trials(cluster, work, n=1)  # type: ignore[arg-type]
    assert row["outcome"] == "pass", row["details"]
