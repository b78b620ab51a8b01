"""Calling every shard at once: threads in one process, or Ray Serve handles.

A fan-out takes one argument tuple per shard (``None``: that shard has no work)
and returns the shards' answers in shard order. Both kinds are owned by the
collection that uses them (no module-level pool).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Protocol


class FanOut(Protocol):
    n: int

    def call(self, method: str, args: Sequence[tuple | None]) -> list[Any]: ...

    def close(self) -> None: ...


def _share_cores(threads: int) -> None:
    """Give this worker thread's FAISS searches ``threads`` OpenMP threads (the setting is per calling thread).

    Each shard thread would otherwise open a team of one OpenMP thread per
    core: 4 shards on 2 cores ran 8 threads, and a Flat search took 5× longer
    than with 2 shards (bench/ray_scale.py, 2026-11-23).
    """
    from hiera.index.dense import faiss_module

    faiss_module().omp_set_num_threads(threads)


class LocalFanOut:
    """Shards in this process, queried in parallel threads (FAISS, numpy and bm25s release the GIL)."""

    def __init__(self, shards: Sequence[Any], cores: int | None = None) -> None:
        self.shards = list(shards)
        self.cores = cores or os.cpu_count() or 1
        self.n = len(self.shards)
        self._pool: ThreadPoolExecutor | None = None

    def call(self, method: str, args: Sequence[tuple | None]) -> list[Any]:
        jobs = [(i, a) for i, a in enumerate(args) if a is not None]
        out: list[Any] = [None] * self.n
        if len(jobs) <= 1:  # one shard with work: no thread hop
            for i, a in jobs:
                out[i] = getattr(self.shards[i], method)(*a)
            return out
        if self._pool is None:
            per = max(1, self.cores // self.n)
            self._pool = ThreadPoolExecutor(max_workers=self.n, thread_name_prefix="hiera-shard",
                                            initializer=_share_cores, initargs=(per,))
        futures = [(i, self._pool.submit(getattr(self.shards[i], method), *a)) for i, a in jobs]
        for i, f in futures:
            out[i] = f.result()
        return out

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False)
            self._pool = None
