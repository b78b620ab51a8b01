"""A :class:`~hiera.collection.Collection` whose indexes are spread over shards, searched by the unchanged retrievers.

Retrievers read a collection through a handful of index objects: a BM25 index
(``search``, ``scores``), FAISS indexes (``search``, ``ntotal``) and vector
matrices (row gathers and slices), all addressed by global passage / document
position. :class:`ShardedCollection` replaces each by a proxy that asks every
shard and merges:

* top-k searches (BM25, FAISS): each shard's top k, merged by score then
  position (:mod:`hiera.index.merge`) — exact, because BM25 shards score with
  corpus-wide statistics and the FAISS indexes are Flat (sharded builds refuse
  approximate ones);
* full score vectors and matrix rows: the shards' pieces, concatenated.

A shard that does not answer (a remote fan-out) makes the search fail with
:class:`~hiera.errors.ShardUnavailableError`; only a request that asked for
partial results (:func:`hiera.shard.fanout.shard_calls`) gets the top-k merges
of the shards that did answer, and the missing shards are recorded for it
(full score vectors and rows cannot leave a shard out: they still refuse).

Everything above these objects — document stages, DHR's gather and fusion,
normalization by the query's best score, RRF — runs once, on the merged
values, in :mod:`hiera.retrieve`, so it sees exactly what it sees on one
index. Layout arrays (the global order), the corpus store and the encoders
are the build's own: :class:`ShardedCollection` holds a
:class:`~hiera.collection.BuildView` of the top-level build, as a
:class:`~hiera.collection.LocalCollection` does, and holds its shards
(:class:`~hiera.shard.shard.Shard`) behind a fan-out; it subclasses neither.

Methods whose exactness on shards is proved by the tests are listed in
:data:`EXACT_METHODS`; any other registry method is refused with one line.
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from hiera.collection import BuildView, on_view, score_rows
from hiera.errors import BadInputError, ManifestMismatchError
from hiera.index.exact import Placement, resolve_placement
from hiera.index.masked import bm25_top, vector_search
from hiera.index.merge import merge_faiss, merge_topk
from hiera.index.passage_stage import DocLists, HostPassageStage, PassageSpec, Scores, StageResult
from hiera.query import QueryBatch
from hiera.shard.fanout import FanOut, LocalFanOut
from hiera.shard.shard import Shard

# Every method that reaches the indexes only through the proxied objects (tests/shard checks each one).
EXACT_METHODS = frozenset({"bm25", "bm25-doc", "dense", "dhr", "dhr-parallel", "hybrid", "bm25-dhr", "sets"})


def answered(parts: Sequence[Any], starts: Sequence[int]) -> tuple[list[Any], list[int]]:
    """The parts of the shards that answered, with their first positions (a partial request's missing shards are ``None``)."""
    kept = [(p, s) for p, s in zip(parts, starts, strict=True) if p is not None]
    return [p for p, _ in kept], [s for _, s in kept]


class ShardedBm25:
    """A BM25 index over all shards: ``search`` merges top-k lists, ``scores`` concatenates."""

    def __init__(self, fan: FanOut, kind: str, starts: Sequence[int], size: int) -> None:
        self.fan, self.kind, self.starts, self.size = fan, kind, list(starts), size

    def search(self, query: str, k: int) -> tuple[np.ndarray, np.ndarray]:
        parts = self.fan.call("bm25_search", [(self.kind, query, k)] * self.fan.n, partial_ok=True)
        return merge_topk(*answered(parts, self.starts), k)

    def scores(self, query: str) -> np.ndarray:
        return np.concatenate(self.fan.call("bm25_scores", [(self.kind, query)] * self.fan.n)).astype(np.float32)

    def scores_at(self, query: str, positions: np.ndarray) -> np.ndarray:
        """The scores of ``positions`` only: each shard scores its own, in its local positions."""
        pos = np.asarray(positions, dtype=np.int64)
        out = np.zeros(len(pos), dtype=np.float32)
        if len(pos) == 0:
            return out
        bounds = np.asarray([*self.starts, self.size], dtype=np.int64)
        owner = np.searchsorted(bounds, pos, side="right") - 1
        args: list[tuple | None] = [
            (self.kind, query, pos[owner == s] - bounds[s]) if (owner == s).any() else None for s in range(self.fan.n)
        ]
        for s, part in enumerate(self.fan.call("bm25_scores_at", args)):
            if part is not None:
                out[owner == s] = part
        return out


class ShardedFaiss:
    """A Flat FAISS index over all shards, shaped like one (``search`` returns (scores, ids))."""

    def __init__(self, fan: FanOut, kind: str, starts: Sequence[int], ntotal: int, d: int) -> None:
        self.fan, self.kind, self.starts, self.ntotal, self.d = fan, kind, list(starts), ntotal, d

    def search(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        q = np.ascontiguousarray(np.atleast_2d(queries), dtype=np.float32)
        parts = self.fan.call("faiss_search", [(self.kind, q, k)] * self.fan.n, partial_ok=True)
        return merge_faiss(*answered(parts, self.starts), k)


class ShardedMatrix:
    """A vector matrix over all shards: integer-array gathers and slices fetch the shards' rows."""

    def __init__(self, fan: FanOut, kind: str, starts: Sequence[int], total: int, dim: int, dtype: Any) -> None:
        self.fan, self.kind = fan, kind
        self.bounds = np.asarray([*starts, total], dtype=np.int64)
        self.shape = (total, dim)
        self.dtype = np.dtype(dtype)

    def __len__(self) -> int:
        return self.shape[0]

    def __getitem__(self, key: Any) -> np.ndarray:
        if isinstance(key, slice):
            start, stop, step = key.indices(self.shape[0])
            if step != 1:
                return self[start:stop][::step]
            return self._range(start, stop)
        if isinstance(key, int | np.integer):
            i = int(key) + (self.shape[0] if int(key) < 0 else 0)
            return self._gather(np.asarray([i]))[0]
        return self._gather(np.asarray(key, dtype=np.int64))

    def _range(self, start: int, stop: int) -> np.ndarray:
        args: list[tuple | None] = []
        for a, b in zip(self.bounds[:-1], self.bounds[1:], strict=True):
            lo, hi = max(start, int(a)), min(stop, int(b))
            args.append((self.kind, lo - int(a), hi - int(a)) if lo < hi else None)
        parts = [p for p in self.fan.call("row_range", args) if p is not None]
        return np.concatenate(parts) if parts else np.zeros((0, self.shape[1]), dtype=self.dtype)

    def _gather(self, pos: np.ndarray) -> np.ndarray:
        out = np.empty((len(pos), self.shape[1]), dtype=self.dtype)
        if len(pos) == 0:
            return out
        if pos.min() < 0 or pos.max() >= self.shape[0]:
            raise IndexError(f"row positions out of range 0..{self.shape[0] - 1}")
        owner = np.searchsorted(self.bounds, pos, side="right") - 1
        args: list[tuple | None] = []
        for s in range(len(self.bounds) - 1):
            mine = owner == s
            args.append((self.kind, pos[mine] - self.bounds[s]) if mine.any() else None)
        for s, rows in enumerate(self.fan.call("rows", args)):
            if rows is not None:
                out[owner == s] = rows
        return out


@on_view
class ShardedCollection:
    """The :class:`~hiera.collection.Collection` of a sharded build; ``fanout`` given: the shards live elsewhere (Ray Serve).

    ``options`` open the build view (``doc_encoder``, ``passage_encoder``,
    ``mmap``, ``cache_dir``, ``vectors``, ``backend``). ``device`` is where
    the query encoders run; each shard searches its own FAISS indexes where
    it runs, so ``dense_search`` can only be ``faiss`` (or ``auto``):
    ``exact`` is refused in one line before anything is opened.
    """

    def __init__(self, root: str | Path, *, fanout: FanOut | None = None, device: str = "auto",
                 dense_search: str = "auto", **options: Any) -> None:
        if str(dense_search).strip().lower() == "exact":
            raise BadInputError(
                f"--dense-search exact: {root} is a sharded build, whose shards search their own FAISS indexes "
                "where they run; use --dense-search faiss (or auto), or search an unsharded build exactly"
            )
        self.placement: Placement = resolve_placement(device, "faiss")
        self.view = BuildView(root, **options)
        self.view.model_device = self.placement.device
        self.shards = list(self.view.manifest.shards)
        if not self.shards:
            raise ManifestMismatchError(f"the live build of {self.view.root} is not sharded")
        self.doc_starts = [int(e["docs"][0]) for e in self.shards]
        self.passage_starts = [int(e["passages"][0]) for e in self.shards]
        self._check_ranges()
        if fanout is None:
            v = self.view
            local = [Shard(v.build_dir, e, v.manifest.base_version, mmap=v.mmap, vectors=v.vectors)
                     for e in self.shards]
            fanout = LocalFanOut(local)
            # a server reopens the collection after every rebuild: the old one's threads go with it
            weakref.finalize(self, fanout.close)
        self.fanout = fanout
        self._passage_stage = HostPassageStage(self.view.doc_offsets, self._score_candidates)

    def _check_ranges(self) -> None:
        """The shards tile the documents and passages, in order (else the manifest is damaged)."""
        v = self.view
        d = [(int(e["docs"][0]), int(e["docs"][1])) for e in self.shards]
        p = [(int(e["passages"][0]), int(e["passages"][1])) for e in self.shards]
        for (ranges, total, what) in ((d, v.n_docs, "documents"), (p, v.n_passages, "passages")):
            ends = [0] + [b for _, b in ranges]
            if [a for a, _ in ranges] != ends[:-1] or ends[-1] != total:
                raise ManifestMismatchError(
                    f"the shards of {v.build_dir} do not cover its {total} {what} in order; rebuild with "
                    f"`hiera build {v.root}`"
                )

    def check_method(self, name: str) -> None:
        if name not in EXACT_METHODS:
            raise BadInputError(
                f"method {name!r} is not served on a sharded build ({len(self.shards)} shards): its results are not "
                f"proved identical to one index's; sharded methods: {', '.join(sorted(EXACT_METHODS))}"
            )

    def _dim(self, level: str) -> int:
        return int(self.view.manifest.models[level]["dim"])

    @property
    def _vector_dtype(self) -> Any:
        return np.float16 if self.view.vectors == "float16" else np.float32

    def _bm25(self, kind: str, starts: list[int], size: int) -> ShardedBm25:
        self.view.need("BM25", self.view.manifest.bm25 is not None)
        return ShardedBm25(self.fanout, kind, starts, size)

    def _faiss(self, kind: str, starts: list[int], total: int, level: str) -> ShardedFaiss:
        self.view.need("dense", self.view.has_dense)
        return ShardedFaiss(self.fanout, kind, starts, total, self._dim(level))

    def _matrix(self, kind: str, starts: list[int], total: int, level: str) -> ShardedMatrix:
        self.view.need("dense", self.view.has_dense)
        return ShardedMatrix(self.fanout, kind, starts, total, self._dim(level), self._vector_dtype)

    @cached_property
    def bm25_passages(self) -> ShardedBm25:
        return self._bm25("passages", self.passage_starts, self.view.n_passages)

    @cached_property
    def bm25_docs(self) -> ShardedBm25:
        return self._bm25("docs", self.doc_starts, self.view.n_docs)

    @cached_property
    def passage_faiss(self) -> ShardedFaiss:
        return self._faiss("passages", self.passage_starts, self.view.n_passages, "passage")

    @cached_property
    def doc_faiss(self) -> ShardedFaiss:
        return self._faiss("docs", self.doc_starts, self.view.n_docs, "doc")

    @cached_property
    def doc_mean_faiss(self) -> ShardedFaiss:
        return self._faiss("docs-mean", self.doc_starts, self.view.n_docs, "passage")

    @cached_property
    def passage_vectors(self) -> ShardedMatrix:
        return self._matrix("passages", self.passage_starts, self.view.n_passages, "passage")

    @cached_property
    def doc_vectors(self) -> ShardedMatrix:
        return self._matrix("docs", self.doc_starts, self.view.n_docs, "doc")

    @cached_property
    def doc_mean_vectors(self) -> ShardedMatrix:
        return self._matrix("docs-mean", self.doc_starts, self.view.n_docs, "passage")

    def passage_lists(
        self, query: str, qp: np.ndarray, depth: int, allowed: Any = None
    ) -> tuple[tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]:
        """Both lists in one call per shard; inside a filter, each list through :mod:`hiera.index.masked` over the
        sharded BM25 and FAISS fan-outs (BM25 scores the allowed rows on their shards)."""
        if allowed is not None:
            bm25 = bm25_top(self.bm25_passages, query, depth, allowed, "passage")
            ids, sc = vector_search(self.passage_faiss, lambda: self.passage_vectors, qp, depth, allowed, "passage")
            keep = ids[0] >= 0
            return bm25, (ids[0][keep].astype(np.int64), sc[0][keep])
        self.view.need("BM25", self.view.manifest.bm25 is not None)  # as one index refuses: never an empty BM25 list
        self.view.need("dense", self.view.has_dense)
        q = np.ascontiguousarray(np.atleast_2d(qp), dtype=np.float32)
        parts, starts = answered(self.fanout.call("passage_lists", [(query, q, depth)] * self.fanout.n, partial_ok=True),
                                 self.passage_starts)
        return merge_topk([p[0] for p in parts], starts, depth), merge_topk([p[1] for p in parts], starts, depth)

    def passage_scores(self, positions: np.ndarray, qp: np.ndarray) -> np.ndarray:
        return score_rows(self.passage_vectors, np.asarray(positions, dtype=np.int64), qp)

    @property
    def passage_backend(self) -> str:
        return "numpy, shards"

    def passage_stage(self, batch: QueryBatch, docs: DocLists, spec: PassageSpec) -> list[StageResult]:
        """DHR's passage stage: candidates from the global layout, their scores from the shards in one call each."""
        qp = batch.vectors.get("qp") if spec.dense else None
        return self._passage_stage.run(batch.texts, qp, docs, spec, batch.filter)

    def _score_candidates(self, texts: Sequence[str], qp: np.ndarray, positions: Sequence[np.ndarray], dense: bool,
                          bm25: bool) -> Scores:
        """Each query's candidates split by owner shard; every shard scores all of its part of the batch at once."""
        if dense:
            self.view.need("dense", self.view.has_dense)
        if bm25:
            self.view.need("BM25", self.view.manifest.bm25 is not None)
        bounds = np.asarray([*self.passage_starts, self.view.n_passages], dtype=np.int64)
        owners = [np.searchsorted(bounds, p, side="right") - 1 for p in positions]
        args: list[tuple | None] = []
        for s in range(self.fanout.n):
            local = [p[o == s] - bounds[s] for p, o in zip(positions, owners, strict=True)]
            args.append((list(texts), qp, local, dense, bm25) if any(len(x) for x in local) else None)
        d = [np.zeros(len(p), np.float32) for p in positions] if dense else None
        b = [np.zeros(len(p), np.float32) for p in positions] if bm25 else None
        for s, part in enumerate(self.fanout.call("score_candidates", args)):
            if part is None:
                continue
            for i, o in enumerate(owners):
                mine = o == s
                if d is not None:
                    d[i][mine] = part[0][i]
                if b is not None:
                    b[i][mine] = part[1][i]
        return Scores(d, b)

    def warmup(self) -> None:
        self.fanout.call("warmup", [()] * self.fanout.n)
        self.view.warmup()
