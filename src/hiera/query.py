"""A batch of queries as every method and stage reads it: texts, query vectors, parameters, a method's own state.

``Retriever.batch_search`` encodes a batch once (:class:`QueryBatch`), and
each query of it is a :class:`Query`: a typed view (its text, its vectors by
name, the batch's parameters) instead of a dictionary passed through every
call. A method that prepares more per query (a parsed set expression, a
FetchHR head's vectors) keeps it in :attr:`QueryBatch.states` as a value of
its own type. Batched stages (DHR's passage stage) take the batch itself.

A filtered search carries its compiled filter in :attr:`QueryBatch.filter`
(an :class:`Allowed`: which documents and passages may be returned), so every
stage that reads the batch sees the same masks; ``None`` means no filter and
no mask work at all.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

# The query vectors a batch can carry: the passage encoder's and the document encoder's.
PASSAGE, DOC = "qp", "qd"


@dataclass(eq=False)
class Allowed:
    """A compiled filter: the documents and passages a search may return, as boolean masks in index order.

    ``passages`` is never wider than its documents (a passage is allowed only
    if its document is), and a document is allowed when at least one of its
    passages is. Positions and device copies are derived once and kept.
    """

    expr: str  # the filter as parsed, in canonical form
    docs: np.ndarray  # (n_docs,) bool
    passages: np.ndarray  # (n_passages,) bool
    _cache: dict[Any, Any] = field(default_factory=dict, repr=False)

    @property
    def n_docs(self) -> int:
        return int(self.doc_positions.shape[0])

    @property
    def n_passages(self) -> int:
        return int(self.passage_positions.shape[0])

    @property
    def doc_positions(self) -> np.ndarray:
        """Allowed document positions, ascending (int64)."""
        return self._derive("doc_positions", lambda: np.flatnonzero(self.docs).astype(np.int64))

    @property
    def passage_positions(self) -> np.ndarray:
        """Allowed passage positions, ascending (int64)."""
        return self._derive("passage_positions", lambda: np.flatnonzero(self.passages).astype(np.int64))

    def level(self, name: str) -> np.ndarray:
        """The mask of ``doc`` or ``passage`` positions."""
        return self.docs if name == "doc" else self.passages

    def positions(self, name: str) -> np.ndarray:
        return self.doc_positions if name == "doc" else self.passage_positions

    def tensor(self, name: str, device: str) -> Any:
        """The ``doc`` or ``passage`` mask as a boolean torch tensor on ``device``, uploaded once."""

        def upload() -> Any:
            import torch

            return torch.from_numpy(self.level(name)).to(device)

        return self._derive(("tensor", name, device), upload)

    def _derive(self, key: Any, make: Any) -> Any:
        if key not in self._cache:
            self._cache[key] = make()
        return self._cache[key]

    @classmethod
    def rows(cls, expr: str, mask: np.ndarray) -> Allowed:
        """One level of rows (a name table's: one row per name), the same mask at either level."""
        return cls(expr, mask, mask)

    def within(self, other: Allowed) -> Allowed:
        """This filter inside ``other`` (a build's live rows: removed and replaced documents are never allowed)."""
        return Allowed(self.expr, self.docs & other.docs, self.passages & other.passages)

    def summary(self) -> dict[str, Any]:
        """What a trace records of the filter."""
        return {"filter": self.expr, "documents": self.n_docs, "of_documents": int(self.docs.shape[0]),
                "passages": self.n_passages, "of_passages": int(self.passages.shape[0])}


@dataclass
class QueryBatch:
    """Queries searched together, with what was computed for all of them at once."""

    texts: list[str]
    params: dict[str, Any] = field(default_factory=dict)
    vectors: dict[str, np.ndarray] = field(default_factory=dict)  # name → (n, d) float32, one row per query
    encode_ms: float = 0.0  # query encoding, per query
    states: list[Any] | None = None  # a method's own prepared value, one per query
    filter: Allowed | None = None  # what the search may return; None: everything
    _on_device: dict[tuple[str, str], Any] = field(default_factory=dict, repr=False)

    def tensor(self, name: str, device: str) -> Any:
        """Vectors ``name`` as a float32 torch tensor on ``device``, uploaded once per batch: the document stage and
        the passage stage on a GPU share one copy (and its one synchronization, made before either runs)."""
        key = (name, device)
        if key not in self._on_device:
            import torch

            self._on_device[key] = torch.from_numpy(np.ascontiguousarray(self.vector(name), dtype=np.float32)).to(device)
        return self._on_device[key]

    def __len__(self) -> int:
        return len(self.texts)

    def vector(self, name: str) -> np.ndarray:
        """Every query's vector ``name`` as an (n, d) float32 matrix."""
        try:
            return self.vectors[name]
        except KeyError:
            raise KeyError(f"no {name!r} query vectors were computed for this batch") from None

    def query(self, i: int) -> Query:
        return Query(self, i)

    def __iter__(self):  # type: ignore[no-untyped-def]
        return (Query(self, i) for i in range(len(self.texts)))


@dataclass(frozen=True)
class Query:
    """One query of a :class:`QueryBatch`."""

    batch: QueryBatch
    i: int

    @property
    def text(self) -> str:
        return self.batch.texts[self.i]

    @property
    def params(self) -> dict[str, Any]:
        return self.batch.params

    @property
    def filter(self) -> Allowed | None:
        return self.batch.filter

    @property
    def state(self) -> Any:
        return None if self.batch.states is None else self.batch.states[self.i]

    def vector(self, name: str) -> np.ndarray:
        return self.batch.vector(name)[self.i]

    def has(self, name: str) -> bool:
        return name in self.batch.vectors

    @property
    def qp(self) -> np.ndarray:
        """The passage encoder's query vector."""
        return self.vector(PASSAGE)

    @property
    def qd(self) -> np.ndarray:
        """The document encoder's query vector."""
        return self.vector(DOC)


def text_query(text: str, allowed: Allowed | None = None, **vectors: np.ndarray) -> Query:
    """A one-query batch (tools that score a single question outside a retriever); ``allowed``: its filter
    (a collection's live rows, at least, when documents were removed)."""
    batch = QueryBatch([text], vectors={k: np.atleast_2d(v).astype(np.float32, copy=False) for k, v in vectors.items()})
    batch.filter = allowed
    return batch.query(0)
