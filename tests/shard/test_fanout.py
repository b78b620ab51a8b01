"""The in-process fan-out: shards answer in parallel threads that share the cores instead of oversubscribing them."""

from __future__ import annotations

import os

import helpers
import pytest

from hiera.index.dense import faiss_module
from hiera.shard.fanout import LocalFanOut


class ThreadsProbe:
    def threads(self) -> int:
        return int(faiss_module().omp_get_max_threads())


def test_shard_threads_split_the_cores_for_faiss() -> None:
    before = faiss_module().omp_get_max_threads()
    for n, cores, want in ((2, 8, 4), (4, 8, 2), (3, 2, 1), (2, None, max(1, (os.cpu_count() or 1) // 2))):
        fan = LocalFanOut([ThreadsProbe() for _ in range(n)], cores=cores)
        try:
            got = fan.call("threads", [()] * n)
        finally:
            fan.close()
        assert got == [want] * n, (n, cores)
    assert faiss_module().omp_get_max_threads() == before  # the calling thread keeps its setting


def test_an_unreachable_ray_address_is_one_line_at_once() -> None:
    """Ray retries a head that does not answer for minutes; a HOST:PORT nothing listens on is refused within seconds."""
    import time

    pytest.importorskip("ray")
    from hiera.errors import HieraError
    from hiera.shard.engine import connect_ray

    port = helpers.free_port()  # nothing listens there
    t = time.monotonic()
    with pytest.raises(HieraError, match=f"cannot reach the Ray head at 127.0.0.1:{port}: .*refused") as e:
        connect_ray(f"127.0.0.1:{port}")
    assert time.monotonic() - t < 10 and "\n" not in str(e.value)
