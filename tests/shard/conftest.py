"""Fixtures for the shard tests: one small real collection, unsharded and sharded, and a local Ray head.

The collection is the shared test documents plus the extra ones (8 documents,
39 passages: encodes in seconds, and every build after the first reads its
vectors from the session's embedding cache). Ray starts once per session, on
127.0.0.1 with no dashboard, 2 CPUs and a temp dir outside the working tree,
and is shut down at the end of the session whatever the tests did.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import helpers
import pytest

from hiera.index.build import BuildOptions


def make_collection(root: Path, cache: Path, **options: object) -> Path:
    """The shared and the extra documents, built with ``options`` (shards, engine) through the test helper."""
    opts = BuildOptions(progress=False, cache_dir=cache, **options)  # type: ignore[arg-type]
    return helpers.build_collection(root, helpers.make_docs() + helpers.make_extra_docs(), opts)


@pytest.fixture(scope="session")
def shard_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return helpers.session_cache_dir(tmp_path_factory)


@pytest.fixture(scope="session")
def unsharded(tmp_path_factory: pytest.TempPathFactory, shard_cache: Path) -> Path:
    """The reference: one index over the whole collection (built first, so it fills the embedding cache)."""
    return make_collection(tmp_path_factory.mktemp("shard") / "one", shard_cache)


@pytest.fixture(scope="session")
def sharded1(tmp_path_factory: pytest.TempPathFactory, shard_cache: Path, unsharded: Path) -> Path:
    return make_collection(tmp_path_factory.mktemp("shard") / "s1", shard_cache, shards=1)


@pytest.fixture(scope="session")
def sharded3(tmp_path_factory: pytest.TempPathFactory, shard_cache: Path, unsharded: Path) -> Path:
    """Three shards built in-process (no Ray)."""
    return make_collection(tmp_path_factory.mktemp("shard") / "s3", shard_cache, shards=3)


@pytest.fixture
def sharded3_copy(sharded3: Path, tmp_path: Path) -> Path:
    """A private copy a test may damage."""
    return helpers.copy_collection(sharded3, tmp_path / "col")


@pytest.fixture(scope="session")
def ray_head() -> Iterator[dict]:
    """A local Ray head for the session: 127.0.0.1, no dashboard, 2 CPUs, temp dir in /tmp; always shut down."""
    ray = pytest.importorskip("ray")
    if ray.is_initialized():
        pytest.skip("Ray is already initialized in this process")
    tmp = tempfile.mkdtemp(prefix="hiera-ray-", dir="/tmp")  # short: Ray's unix sockets live under it
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, _node_ip_address="127.0.0.1",
             _temp_dir=tmp, _metrics_export_port=helpers.free_port(), namespace="hiera-tests")
    try:
        yield {"temp_dir": tmp, "http_port": helpers.free_port()}
    finally:
        try:
            from ray import serve

            serve.shutdown()
        finally:
            ray.shutdown()
            shutil.rmtree(tmp, ignore_errors=True)


@pytest.fixture(scope="session")
def ray3(tmp_path_factory: pytest.TempPathFactory, shard_cache: Path, unsharded: Path, ray_head: dict) -> Path:
    """Three shards built by the Ray engine (Ray tasks, Ray Data encoding actors)."""
    return make_collection(tmp_path_factory.mktemp("shard") / "r3", shard_cache, shards=3, engine="ray")
