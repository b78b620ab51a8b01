"""The one interface every retrieval method implements (Pyserini's searcher, as a protocol).

The result types it returns live in :mod:`hiera.results`, below every
package that produces or consumes them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

from hiera.results import Results
from hiera.spec import Level


@runtime_checkable
class Retriever(Protocol):
    """``search(query, k)`` and ``batch_search(queries, k)``, Pyserini-style.

    ``levels`` lists what the method can return; ``params`` are per-query
    overrides of the method's parameters as declared in :mod:`hiera.spec`.
    """

    name: str
    levels: tuple[Level, ...]

    def search(self, query: str, k: int = 10, level: Level | None = None, **params: Any) -> Results: ...

    def batch_search(
        self, queries: Sequence[str], k: int = 10, level: Level | None = None, **params: Any
    ) -> list[Results]: ...
