"""Calling every shard at once: threads in one process, or Ray Serve handles.

A fan-out takes one argument tuple per shard (``None``: that shard has no work)
and returns the shards' answers in shard order. Both kinds are owned by the
collection that uses them (no module-level pool).
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Protocol


class FanOut(Protocol):
    n: int

    def call(self, method: str, args: Sequence[tuple | None]) -> list[Any]: ...

    def close(self) -> None: ...


class LocalFanOut:
    """Shards in this process, queried in parallel threads (FAISS, numpy and bm25s release the GIL)."""

    def __init__(self, shards: Sequence[Any]) -> None:
        self.shards = list(shards)
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
            self._pool = ThreadPoolExecutor(max_workers=self.n, thread_name_prefix="hiera-shard")
        futures = [(i, self._pool.submit(getattr(self.shards[i], method), *a)) for i, a in jobs]
        for i, f in futures:
            out[i] = f.result()
        return out

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False)
            self._pool = None
