"""The in-process fan-out: shards answer in parallel threads that share the cores instead of oversubscribing them."""

from __future__ import annotations

import os

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
