"""Calling every shard at once: threads in one process, or Ray Serve handles.

A fan-out takes one argument tuple per shard (``None``: that shard has no work)
and returns the shards' answers in shard order. Both kinds are owned by the
collection that uses them (no module-level pool).

A remote shard can fail to answer (its replica died, its node is gone, it is
too slow). A fan-out never hides that: the call raises
:class:`~hiera.errors.ShardUnavailableError` (the server's 503), unless the
request asked for partial results (:func:`shard_calls` with ``partial``) *and*
the caller can merge without that shard (``partial_ok``: the top-k searches,
where a missing shard only removes its own hits). Then the shard's answer is
``None`` and its name is recorded in :attr:`ShardCalls.missing`, which the
server reports as ``partial: true`` with ``missing_shards``. In-process shards
(:class:`LocalFanOut`) cannot go missing: there the policy changes nothing.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Protocol

from hiera.errors import ShardUnavailableError


class FanOut(Protocol):
    n: int

    def call(self, method: str, args: Sequence[tuple | None], *, partial_ok: bool = False) -> list[Any]: ...

    def close(self) -> None: ...


@dataclass
class ShardCalls:
    """One request's terms for its shard calls: may it go on without a shard, and until when may it wait."""

    partial: bool = False
    deadline: float | None = None  # time.monotonic() after which no shard is waited for
    missing: dict[str, str] = field(default_factory=dict)  # shard name -> why it did not answer

    def remaining(self) -> float | None:
        return None if self.deadline is None else max(0.0, self.deadline - time.monotonic())


_CALLS: ContextVar[ShardCalls | None] = ContextVar("hiera_shard_calls", default=None)


@contextmanager
def shard_calls(partial: bool = False, timeout: float | None = None) -> Iterator[ShardCalls]:
    """The shard calls made inside (in this thread or context) follow these terms; the yielded object collects what went missing."""
    calls = ShardCalls(partial=partial, deadline=None if timeout is None else time.monotonic() + timeout)
    token = _CALLS.set(calls)
    try:
        yield calls
    finally:
        _CALLS.reset(token)


def current_calls() -> ShardCalls | None:
    return _CALLS.get()


def settle(names: Sequence[str], called: int, failed: Mapping[int, str], partial_ok: bool) -> None:
    """After a fan-out: raise for the shards that did not answer, unless this request and this call may do without them.

    Recorded as missing when allowed; refused when the request did not ask for
    partial results, when the caller needs every shard's part (rows, full
    score vectors), or when no shard answered at all.
    """
    if not failed:
        return
    calls = current_calls()
    shards, reasons = [names[i] for i in failed], list(failed.values())
    if calls is None or not calls.partial:
        raise ShardUnavailableError(shards, reasons)
    if not partial_ok:
        raise ShardUnavailableError(shards, [*reasons, "this step needs every shard's rows or scores, which a "
                                             "partial result cannot leave out"])
    if len(failed) == called:
        raise ShardUnavailableError(shards, [*reasons, "no shard answered"])
    for i, why in failed.items():
        calls.missing.setdefault(names[i], why)


def _share_cores(threads: int) -> None:
    """Give this worker thread's FAISS searches ``threads`` OpenMP threads (the setting is per calling thread).

    Each shard thread would otherwise open a team of one OpenMP thread per
    core: 4 shards on 2 cores ran 8 threads, and a Flat search took 5× longer
    than with 2 shards (bench/ray_scale.py).
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

    def call(self, method: str, args: Sequence[tuple | None], *, partial_ok: bool = False) -> list[Any]:
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
