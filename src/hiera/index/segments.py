"""A build changed without a rebuild: a base segment, at most one delta segment, and tombstones.

``hiera remove`` and ``hiera add`` / ``ingest`` of changed documents publish
a new build (:mod:`hiera.index.update`) that hard-links the previous build's
index files (the *base*), adds the new text as a small *delta* segment under
``delta/`` (BM25, vectors, FAISS: a build of just those documents), and lists
the base's removed or replaced documents in ``tombstones.npy``. The layout
lists base then delta positions, so one position still addresses one row in
every index: base rows are ``[0, nb)``, delta rows ``[nb, nb + nd)``.

The objects here compose a base index and a delta index into one object
shaped like either (as FAISS contrib's ``IndexShards`` composes shards), so
every retriever runs unchanged; tombstoned rows stay in the base and are
masked at search time by the same mask filters use
(:attr:`hiera.collection.BuildView.live`). A delta's BM25 is scored with the
base's statistics plus its own (:func:`hiera.index.bm25stats.with_base`); the
tombstoned texts still count in them until compaction rewrites the build
(:data:`COMPACT_AT`, ``docs/UPDATES.md`` for the drift measured).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from hiera.index.dense import load_faiss
from hiera.index.merge import merge_faiss
from hiera.index.names import KINDS, NameTable
from hiera.index.select import topk
from hiera.io import load_npy

DELTA_DIR = "delta"
TOMBSTONES = "tombstones.npy"  # positions of the base's dead documents (int64, ascending)
COMPACT_AT = 0.2  # dead + delta rows past this share of the build's rows: the change rewrites the whole build


def read_tombstones(build_dir: Path) -> np.ndarray:
    """Dead document positions of a build (empty for a build without tombstones)."""
    path = Path(build_dir) / TOMBSTONES
    if not path.exists():
        return np.zeros(0, dtype=np.int64)
    return np.asarray(load_npy(path), dtype=np.int64)


def dead_masks(dead_docs: np.ndarray, offsets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(live documents, live passages)`` boolean masks from the dead document positions and the offset table."""
    docs = np.ones(len(offsets) - 1, dtype=bool)
    docs[dead_docs] = False
    passages = np.repeat(docs, np.diff(offsets))
    return docs, passages


class SegmentedBm25:
    """Base and delta BM25 indexes as one: score vectors concatenated, top k over them."""

    def __init__(self, base: Any, delta: Any) -> None:
        self.parts = (base, delta)
        self.start = int(base.size)
        self.size = self.start + int(delta.size)

    def scores(self, query: str) -> np.ndarray:
        return np.concatenate([p.scores(query) for p in self.parts]).astype(np.float32, copy=False)

    def scores_at(self, query: str, positions: np.ndarray) -> np.ndarray:
        pos = np.asarray(positions, dtype=np.int64)
        out = np.zeros(len(pos), dtype=np.float32)
        low = pos < self.start
        if low.any():
            out[low] = self.parts[0].scores_at(query, pos[low])
        if (~low).any():
            out[~low] = self.parts[1].scores_at(query, pos[~low] - self.start)
        return out

    def search(self, query: str, k: int) -> tuple[np.ndarray, np.ndarray]:
        return topk(self.scores(query), k, positive_only=True)


class SegmentedMatrix:
    """Base and delta vector matrices as one: integer gathers, slices and rows by global position."""

    def __init__(self, parts: Sequence[np.ndarray]) -> None:
        self.parts = list(parts)
        self.bounds = np.cumsum([0, *(len(p) for p in self.parts)]).astype(np.int64)
        self.shape = (int(self.bounds[-1]), int(self.parts[0].shape[1]))
        self.dtype = self.parts[0].dtype

    def __len__(self) -> int:
        return self.shape[0]

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        out = np.concatenate([np.asarray(p) for p in self.parts])
        return out if dtype is None else out.astype(dtype, copy=False)

    def __getitem__(self, key: Any) -> np.ndarray:
        if isinstance(key, slice):
            start, stop, step = key.indices(self.shape[0])
            pieces = [p[max(start - a, 0):max(min(stop, b) - a, 0)]
                      for p, a, b in zip(self.parts, self.bounds[:-1], self.bounds[1:], strict=True)]
            return np.concatenate(pieces)[::step]
        if isinstance(key, int | np.integer):
            i = int(key) + (self.shape[0] if int(key) < 0 else 0)
            s = int(np.searchsorted(self.bounds, i, side="right") - 1)
            return np.asarray(self.parts[s][i - self.bounds[s]])
        pos = np.asarray(key, dtype=np.int64)
        out = np.empty((*pos.shape, self.shape[1]), dtype=self.dtype)
        if pos.size == 0:
            return out
        if pos.min() < 0 or pos.max() >= self.shape[0]:
            raise IndexError(f"row positions out of range 0..{self.shape[0] - 1}")
        owner = np.searchsorted(self.bounds, pos, side="right") - 1
        for s, part in enumerate(self.parts):
            mine = owner == s
            if mine.any():
                out[mine] = part[pos[mine] - self.bounds[s]]
        return out


class SegmentedIndex:
    """Base and delta FAISS indexes as one index (``search`` → FAISS's ``(scores, ids)``, ids global)."""

    def __init__(self, base: Any, delta: Any) -> None:
        self.parts = (base, delta)
        self.starts = (0, int(base.ntotal))
        self.ntotal = int(base.ntotal) + int(delta.ntotal)
        self.d = int(base.d)

    def search(self, x: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        q = np.ascontiguousarray(np.atleast_2d(x), dtype=np.float32)
        answers = []
        for part in self.parts:
            kk = max(1, min(int(k), int(part.ntotal)))
            scores, ids = part.search(q, kk)
            answers.append((ids, scores))
        return merge_faiss(answers, self.starts, int(k))


def stored_vectors(build_dir: Path, manifest: Any, level: str) -> Any:
    """A build's stored ``level`` (``passage`` / ``doc``) vectors by layout position, its delta's after its base's."""
    base = load_npy(Path(build_dir) / "dense" / f"{level}s.f16.npy", mmap=True)
    delta = Path(build_dir) / DELTA_DIR / "dense" / f"{level}s.f16.npy"
    if not (getattr(manifest, "updates", None) or {}).get("delta") or not delta.exists():
        return base
    return SegmentedMatrix([base, load_npy(delta, mmap=True)])


class Chained(Sequence[str]):
    """Two string tables read as one (a base table's rows, then its delta's)."""

    def __init__(self, parts: Sequence[Sequence[str]]) -> None:
        self.parts = list(parts)
        self.bounds = np.cumsum([0, *(len(p) for p in self.parts)]).astype(np.int64)

    def __len__(self) -> int:
        return int(self.bounds[-1])

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        i = int(i) + (len(self) if int(i) < 0 else 0)
        if not 0 <= i < len(self):
            raise IndexError(i)
        s = int(np.searchsorted(self.bounds, i, side="right") - 1)
        return self.parts[s][i - int(self.bounds[s])]


class SegmentedNames:
    """A base name table and its delta's as one table (:class:`~hiera.index.names.NameTable`'s interface).

    The delta holds the names of the delta's documents only, so a change that
    adds text writes names for that text, not for the whole collection; its
    rows follow the base's and its documents are numbered after the base's
    (global positions). A base document that died keeps its rows; the table's
    reader masks them (:class:`hiera.link.titles.TitleIndex`).
    """

    def __init__(self, base: Any, delta: Any, base_docs: int) -> None:
        self.parts = (base, delta)
        self.start = len(base)
        self.titles = Chained([base.titles, delta.titles])
        self.names = Chained([base.names, delta.names])
        self.keys = Chained([base.keys, delta.keys])
        self.doc = np.concatenate([np.asarray(base.doc), np.asarray(delta.doc, dtype=np.int64) + base_docs])
        self.kind = np.concatenate([np.asarray(base.kind), np.asarray(delta.kind)])
        self.prior = np.concatenate([np.asarray(base.prior), np.asarray(delta.prior)])
        self.has_prior = bool(base.has_prior or delta.has_prior)

    def __len__(self) -> int:
        return self.start + len(self.parts[1])

    def rows_of(self, key: str) -> list[int]:
        base, delta = self.parts
        return [*base.rows_of(key), *(self.start + r for r in delta.rows_of(key))]

    @cached_property
    def key_list(self) -> list[str]:
        return list(dict.fromkeys([*self.parts[0].key_list, *self.parts[1].key_list]))

    @cached_property
    def bm25(self) -> Any:
        base = self.parts[0].bm25
        if len(self.parts[1]) == 0:  # delta documents without a name key: nothing of theirs to search
            return base
        delta = self.parts[1].bm25
        return None if base is None or delta is None else SegmentedBm25(base, delta)

    def vectors(self) -> Any:
        if len(self.parts[1]) == 0:
            return self.parts[0].vectors()
        return SegmentedMatrix([self.parts[0].vectors(), self.parts[1].vectors()])

    def kind_name(self, row: int) -> str:
        return KINDS[int(self.kind[row])]


def open_names(build_dir: Path, manifest: Any, bm25_config: Any,
               mmap: bool = True) -> tuple[NameTable | SegmentedNames | None, Any]:
    """A build's name table and the FAISS index over its names' vectors (``None`` without vectors), delta included.

    ``(None, None)`` for a build without a name table.
    """
    record = manifest.names
    if not record:
        return None, None
    build_dir = Path(build_dir)
    table: NameTable | SegmentedNames = NameTable(build_dir, record, bm25_config, mmap=mmap)
    path = build_dir / "dense" / "names.faiss"
    index = load_faiss(path, mmap) if path.exists() else None
    delta_record = (getattr(manifest, "updates", None) or {}).get("names")
    if delta_record:
        delta_dir = build_dir / DELTA_DIR
        delta = NameTable(delta_dir, delta_record, bm25_config, mmap=mmap)
        table = SegmentedNames(table, delta, int(manifest.updates["base"]["documents"]))
        delta_path = delta_dir / "dense" / "names.faiss"
        if index is not None and delta_path.exists():
            index = SegmentedIndex(index, load_faiss(delta_path, mmap))
    return table, index
