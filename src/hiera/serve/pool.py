"""The thread pool searches run in, with a deadline each (504) and a bound on how many wait (503).

Searches run here rather than in FastAPI's thread pool, where the other
endpoints (plain ``def`` functions) run, so that a slow search is abandoned
instead of holding its connection open without bound. Searches overlap: the
encoders and BM25 analyzers serialize their own thread-unsafe calls, the
corpus store opens one SQLite connection per thread, and FAISS/numpy reads
need no lock.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any

from fastapi import HTTPException

from hiera.errors import HieraError, exceptions_only
from hiera.serve.guard import MAX_PENDING_SEARCHES, SEARCH_TIMEOUT_S, SEARCH_WORKERS


class SearchPool:
    """Searches run here, each with a deadline: 504 past ``timeout``, 503 when ``max_pending`` are in the pool.

    A search past its deadline cannot be interrupted (FAISS and numpy do not
    check for cancellation); its thread finishes it and the result is dropped,
    and ``max_pending`` bounds how many such threads can pile up.
    """

    def __init__(self, timeout: float = SEARCH_TIMEOUT_S, workers: int = SEARCH_WORKERS,
                 max_pending: int = MAX_PENDING_SEARCHES) -> None:
        if not timeout > 0:
            raise HieraError(f"the search timeout must be positive, got {timeout}")
        self.timeout = timeout
        self.max_pending = max_pending
        self.workers = workers
        self.executor: ThreadPoolExecutor | None = None  # one per lifespan: an app may be served more than once
        self._pending = 0
        self._lock = threading.Lock()

    async def run(self, fn: Callable[[], Any]) -> Any:
        with self._lock:
            if self._pending >= self.max_pending:
                raise HTTPException(
                    status_code=503, detail=f"the server is busy ({self._pending} searches in progress); retry shortly",
                    headers={"Retry-After": "1"},
                )
            self._pending += 1
            if self.executor is None:
                self.executor = ThreadPoolExecutor(max_workers=self.workers, thread_name_prefix="hiera-search")
            executor = self.executor
        fut = executor.submit(exceptions_only, fn)
        fut.add_done_callback(lambda _: self._done())
        try:
            return await asyncio.wait_for(asyncio.wrap_future(fut), self.timeout)
        except TimeoutError:
            raise HTTPException(
                status_code=504,
                detail=f"the search took longer than {self.timeout:g} s and was abandoned; try a smaller k or top_docs",
            ) from None

    def _done(self) -> None:
        with self._lock:
            self._pending -= 1

    def shutdown(self) -> None:
        with self._lock:
            executor, self.executor = self.executor, None
        if executor is not None:
            executor.shutdown(wait=False, cancel_futures=True)


class Gate:
    """Searches share it; a write of the server holds it alone from its commit until the new build is served.

    Between a removal's commit and the swap to the build without it, the
    old build would hand out row ids the store no longer holds. A waiting
    write holds new searches back, so a steady stream of them cannot starve it.
    """

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._searches = 0
        self._write = False  # held, or waited for

    @contextmanager
    def search(self) -> Iterator[None]:
        with self._cond:
            while self._write:
                self._cond.wait()
            self._searches += 1
        try:
            yield
        finally:
            with self._cond:
                self._searches -= 1
                if not self._searches:
                    self._cond.notify_all()

    def hold(self) -> None:
        """Wait for the searches under way to finish and keep new ones waiting until :meth:`release`."""
        with self._cond:
            while self._write:
                self._cond.wait()
            self._write = True
            while self._searches:
                self._cond.wait()

    def release(self) -> None:
        with self._cond:
            self._write = False
            self._cond.notify_all()
