"""Every way a document can be named, built with the index: name rows, exact keys, BM25 over names, name vectors.

The linking pipeline looks up a question's mentions among the collection's
titles, their base names ("Kiss and Tell (1945 film)" → "Kiss and Tell") and
stored redirect aliases (:mod:`hiera.link.titles`). Computing that table, its
BM25 index and the vectors of every name on a process's first query cost 13 s
on the ~20k-document demo and would cost hours at Wikipedia's ~6M names, so
``hiera build`` (and ``hiera add``) writes them into the build, beside the
other indexes, and a search process only memory-maps them:

``names/titles.bin``, ``titles.idx.npy``
    every document's title, in index order (a string table: UTF-8 blob + offsets);
``names/names.bin``, ``names.idx.npy``, ``names/keys.bin``, ``keys.idx.npy``
    one row per (normalized key, document): the name as written and its key;
``names/doc.npy`` (int32), ``names/kind.npy`` (int8: title, base, alias)
    the row's document and what kind of name it is;
``names/key_hash.npy``, ``names/key_order.npy``
    the rows sorted by a 64-bit hash of their key: an exact lookup is a binary search;
``names/prior.npy``
    each document's in-link prior (``log(1 + in-links) / max``; all zero when no source has wikilinks);
``names/bm25/``
    a BM25 index over the names (bm25s, memory-mapped);
``dense/names.f16.npy``, ``dense/names.faiss``
    the document encoder's vector of every name, searched like the document index.

The files are listed in the manifest (sizes, sha256) like every other index
file, so ``hiera check`` verifies them and a changed file is refused.
"""

from __future__ import annotations

import hashlib
import math
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from hiera.index.bm25 import Bm25Config, Bm25Index
from hiera.index.bm25stats import build_delta
from hiera.io import load_npy
from hiera.text import base_name, name_key

NAMES_DIR = "names"
KINDS = ("title", "base", "alias")


class StringTable(Sequence[str]):
    """Strings stored as one UTF-8 blob plus offsets: memory-mapped, decoded one at a time."""

    def __init__(self, blob: Any, offsets: np.ndarray) -> None:
        self.blob = blob
        self.offsets = offsets

    @classmethod
    def load(cls, directory: Path, name: str, mmap: bool = True) -> StringTable:
        path = directory / f"{name}.bin"
        empty = path.stat().st_size == 0  # a table of no strings (or of empty ones): nothing to map
        blob = np.memmap(path, dtype=np.uint8, mode="r") if mmap and not empty else np.fromfile(path, dtype=np.uint8)
        return cls(blob, load_npy(directory / f"{name}.idx.npy", mmap))

    @staticmethod
    def write(directory: Path, name: str, strings: Iterable[str]) -> int:
        """Write the table; returns the number of strings."""
        offsets = [0]
        with open(directory / f"{name}.bin", "wb") as f:
            for s in strings:
                b = s.encode("utf-8")
                f.write(b)
                offsets.append(offsets[-1] + len(b))
        np.save(directory / f"{name}.idx.npy", np.asarray(offsets, dtype=np.int64))
        return len(offsets) - 1

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        i = int(i)
        if i < 0:
            i += len(self)
        if not 0 <= i < len(self):
            raise IndexError(i)
        return bytes(self.blob[int(self.offsets[i]) : int(self.offsets[i + 1])]).decode("utf-8")


def key_hash(key: str) -> np.uint64:
    """A stable 64-bit hash of a normalized key (Python's ``hash`` changes from process to process)."""
    return np.frombuffer(hashlib.blake2b(key.encode("utf-8"), digest_size=8).digest(), dtype="<u8")[0]


@dataclass
class NameRows:
    """The name table in memory, as the builder makes it."""

    names: list[str]
    keys: list[str]
    doc: np.ndarray
    kind: np.ndarray
    prior: np.ndarray
    top: float = 1.0  # the prior's scale: log(1 + the most in-links)


def name_rows(titles: Sequence[str], aliases: Iterable[tuple[str, str]] = (),
              links: Iterable[list[str]] = (), prior_top: float | None = None) -> NameRows:
    """Titles, base names and aliases → one row per (key, document); the first kind seen for a pair wins.

    An alias points at every document whose title (or base name) is its target.
    The prior counts the documents that link to each document, divided by
    ``log(1 + the most in-links)`` of these titles, or by ``prior_top`` (a
    delta segment's rows take its base's scale, so priors compare across both).
    """
    by_title: dict[str, list[int]] = {}
    for i, t in enumerate(titles):
        by_title.setdefault(t, []).append(i)
    entries: dict[str, dict[int, tuple[str, int]]] = {}

    def add(name: str, doc: int, kind: int) -> None:
        key = name_key(name)
        if key:
            entries.setdefault(key, {}).setdefault(doc, (name, kind))

    for i, t in enumerate(titles):
        add(t, i, 0)
    for i, t in enumerate(titles):
        b = base_name(t)
        if b != t:
            add(b, i, 1)
    for alias, target in aliases:
        for d in by_title.get(target, by_title.get(base_name(target), [])):
            add(alias, d, 2)
    names, keys, doc, kind = [], [], [], []
    for key, docs in entries.items():
        for d, (name, k) in docs.items():
            names.append(name)
            keys.append(key)
            doc.append(d)
            kind.append(k)
    inlinks: Counter[int] = Counter()
    for targets in links:
        for t in set(targets):
            for d in by_title.get(t, ()):
                inlinks[d] += 1
    top = prior_top if prior_top else math.log1p(max(inlinks.values())) if inlinks else 1.0
    prior = np.array([math.log1p(inlinks.get(i, 0)) / top for i in range(len(titles))], dtype=np.float32)
    return NameRows(names, keys, np.asarray(doc, dtype=np.int32), np.asarray(kind, dtype=np.int8), prior, top)


@dataclass(frozen=True)
class NameBase:
    """What a delta name table takes from the base table it extends: BM25 statistics and the prior's scale."""

    bm25: Bm25Index | None
    tokens: int
    prior_top: float


def write_names(out: Path, titles: Sequence[str], rows: NameRows, bm25_config: Bm25Config | None,
                base: NameBase | None = None) -> dict[str, Any]:
    """Write ``names/`` (all but the vectors, which the dense writer adds); returns the manifest's ``names`` record.

    ``base``: these are a delta segment's names, their BM25 scored with the
    base table's statistics plus their own (as a delta's passages are).
    The record keeps the BM25 token count and the prior's scale that a later
    delta over this table needs.
    """
    d = out / NAMES_DIR
    d.mkdir()
    StringTable.write(d, "titles", titles)
    StringTable.write(d, "names", rows.names)
    StringTable.write(d, "keys", rows.keys)
    np.save(d / "doc.npy", rows.doc)
    np.save(d / "kind.npy", rows.kind)
    hashes = np.array([key_hash(k) for k in rows.keys], dtype=np.uint64)
    order = np.argsort(hashes, kind="stable").astype(np.int64)
    np.save(d / "key_hash.npy", hashes[order])
    np.save(d / "key_order.npy", order)
    np.save(d / "prior.npy", rows.prior)
    record: dict[str, Any] = {"rows": len(rows.names), "documents": len(titles), "keys": len(set(rows.keys)),
                              "has_prior": bool(rows.prior.any()), "bm25": bm25_config is not None,
                              "prior_top": float(rows.top)}
    if bm25_config is not None:
        if base is not None and not rows.names:
            record["tokens"] = 0  # nothing to index: the base's BM25 answers alone (no bm25/ here)
        elif base is not None and base.bm25 is not None:
            index, record["tokens"] = build_delta(rows.names, base.bm25, base.tokens, bm25_config)
            index.save(d / "bm25")
        else:
            index = Bm25Index.build(rows.names, bm25_config)
            index.save(d / "bm25")
            record["tokens"] = index.tokens
    return record


class NameTable:
    """The ``names/`` of a build, memory-mapped (see the module docstring); loading it reads no row."""

    def __init__(self, build_dir: Path, record: dict[str, Any], bm25_config: Bm25Config | None, mmap: bool = True) -> None:
        self.dir = Path(build_dir) / NAMES_DIR
        self.record = record
        self.mmap = mmap
        self._bm25_config = bm25_config
        self.titles = StringTable.load(self.dir, "titles", mmap)
        self.names = StringTable.load(self.dir, "names", mmap)
        self.keys = StringTable.load(self.dir, "keys", mmap)
        self.doc = load_npy(self.dir / "doc.npy", mmap)
        self.kind = load_npy(self.dir / "kind.npy", mmap)
        self._hash = load_npy(self.dir / "key_hash.npy", mmap)
        self._order = load_npy(self.dir / "key_order.npy", mmap)
        self.prior = load_npy(self.dir / "prior.npy", mmap)
        self.has_prior = bool(record.get("has_prior", False))

    def __len__(self) -> int:
        return len(self.names)

    def vectors(self) -> np.ndarray:
        """The names' stored vectors (float16, memory-mapped), in row order: a build's ``dense/names.f16.npy``."""
        return load_npy(self.dir.parent / "dense" / "names.f16.npy", self.mmap)

    def rows_of(self, key: str) -> list[int]:
        """The rows whose key is exactly ``key`` (a binary search over the key hashes, then a string check)."""
        if not key:
            return []
        h = key_hash(key)
        lo = int(np.searchsorted(self._hash, h, side="left"))
        hi = int(np.searchsorted(self._hash, h, side="right"))
        return [int(r) for r in self._order[lo:hi] if self.keys[int(r)] == key]

    @cached_property
    def key_list(self) -> list[str]:
        """Every distinct key, for fuzzy matching (decoded on first use)."""
        return list(dict.fromkeys(self.keys[i] for i in range(len(self.keys))))

    @cached_property
    def bm25(self) -> Bm25Index | None:
        if self._bm25_config is None or not (self.dir / "bm25").is_dir():
            return None
        return Bm25Index.load(self.dir / "bm25", self._bm25_config, mmap=self.mmap)

    def kind_name(self, row: int) -> str:
        return KINDS[int(self.kind[row])]


class MemoryNames:
    """The same table made in memory from titles, aliases and links: a build without ``names/`` (an older layout)
    and the unit tests use it; :class:`NameTable`'s interface."""

    def __init__(self, titles: Sequence[str], aliases: Iterable[tuple[str, str]] = (),
                 links: Iterable[list[str]] = ()) -> None:
        rows = name_rows(titles, aliases, links)
        self.titles = list(titles)
        self.names, self.keys, self.doc, self.kind, self.prior = rows.names, rows.keys, rows.doc, rows.kind, rows.prior
        self.has_prior = bool(rows.prior.any())
        self._by_key: dict[str, list[int]] = {}
        for i, k in enumerate(rows.keys):
            self._by_key.setdefault(k, []).append(i)
        self.key_list = list(self._by_key)

    def __len__(self) -> int:
        return len(self.names)

    def rows_of(self, key: str) -> list[int]:
        return list(self._by_key.get(key, ()))

    @cached_property
    def bm25(self) -> Bm25Index:
        return Bm25Index.build(self.names)

    def kind_name(self, row: int) -> str:
        return KINDS[int(self.kind[row])]
