"""One shard's indexes behind the few primitives a sharded search needs.

A shard is a self-contained index directory (its own manifest, BM25 indexes,
FAISS indexes, float16 matrices) over a contiguous range of documents. It is
opened checked: a shard whose directory or files are missing, whose files
changed since the build, or whose manifest is not the one the build recorded
(a shard left over from, or copied from, another build) is refused with a
message naming it.

The primitives (``bm25_search``, ``bm25_scores``, ``faiss_search``, ``score_candidates``,
``rows``, ``row_range``) take and return shard-local positions and plain
numpy arrays, so the same object serves in-process (threads) and behind a
Ray Serve deployment.
"""

from __future__ import annotations

from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from hiera.errors import IndexMissingError
from hiera.index.bm25 import Bm25Config, Bm25Index
from hiera.index.dense import faiss_search, load_faiss, load_matrix
from hiera.index.manifest import SHARDS_DIR, open_shard_manifest, shard_label

BM25_KINDS = {"passages": "bm25-passages", "docs": "bm25-docs"}
FAISS_KINDS = {"passages": "passages.faiss", "docs": "docs.faiss", "docs-mean": "docs-mean.faiss"}
MATRIX_KINDS = {"passages": "passages.f16.npy", "docs": "docs.f16.npy", "docs-mean": "docs-mean.f16.npy"}


class Shard:
    """The indexes of one shard, loaded lazily (memory-mapped like an unsharded collection)."""

    def __init__(self, build_dir: Path, entry: dict[str, Any], corpus_version: int, *, mmap: bool = True,
                 vectors: str = "float16") -> None:
        self.build_dir = Path(build_dir)
        self.entry = entry
        self.name = entry["name"]
        self.dir = self.build_dir / SHARDS_DIR / self.name
        self.manifest = open_shard_manifest(self.build_dir, entry, corpus_version)
        self.mmap = mmap
        self.vectors = vectors

    def _need(self, what: str, present: bool) -> None:
        if not present:
            raise IndexMissingError(f"{shard_label(self.entry, self.build_dir)} has no {what} index")

    @cached_property
    def _bm25(self) -> dict[str, Bm25Index]:
        self._need("BM25", self.manifest.bm25 is not None)
        cfg = Bm25Config.from_dict(self.manifest.bm25 or {})
        return {k: Bm25Index.load(self.dir / d, cfg, mmap=self.mmap) for k, d in BM25_KINDS.items()}

    @cached_property
    def _faiss(self) -> dict[str, Any]:
        self._need("dense", bool(self.manifest.models))
        return {k: load_faiss(self.dir / "dense" / f, self.mmap) for k, f in FAISS_KINDS.items()}

    @cached_property
    def _matrices(self) -> dict[str, np.ndarray]:
        self._need("dense", bool(self.manifest.models))
        out = {}
        for k, f in MATRIX_KINDS.items():
            m = load_matrix(self.dir / "dense" / f, self.mmap)
            out[k] = m if self.vectors == "float16" else np.array(m, dtype=np.float32)
        return out

    # -- the primitives (shard-local positions) --------------------------------------------
    def bm25_search(self, kind: str, query: str, k: int) -> tuple[np.ndarray, np.ndarray]:
        return self._bm25[kind].search(query, k)

    def bm25_scores(self, kind: str, query: str) -> np.ndarray:
        return self._bm25[kind].scores(query)

    def bm25_scores_at(self, kind: str, query: str, positions: np.ndarray) -> np.ndarray:
        return self._bm25[kind].scores_at(query, positions)

    def faiss_search(self, kind: str, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        return faiss_search(self._faiss[kind], queries, k)

    def rows(self, kind: str, positions: np.ndarray) -> np.ndarray:
        return np.asarray(self._matrices[kind][np.asarray(positions, dtype=np.int64)])

    def row_range(self, kind: str, start: int, stop: int) -> np.ndarray:
        return np.asarray(self._matrices[kind][start:stop])

    def passage_lists(
        self, query: str, queries: np.ndarray, depth: int
    ) -> tuple[tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]:
        """BM25's and FAISS's top ``depth`` passages of this shard (hybrid search and DHR's hybrid-max stage)."""
        if self.manifest.bm25 is not None:
            bm25 = self.bm25_search("passages", query, depth)
        else:
            bm25 = (np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32))
        ids, sc = self.faiss_search("passages", queries, depth)
        keep = ids[0] >= 0
        return bm25, (ids[0][keep].astype(np.int64), sc[0][keep])

    def score_candidates(
        self, texts: list[str], queries: np.ndarray | None, positions: list[np.ndarray], dense: bool, bm25: bool
    ) -> tuple[list[np.ndarray] | None, list[np.ndarray] | None]:
        """DHR's passage stage, this shard's part of a batch: the dense and BM25 scores of each query's local positions."""
        d = b = None
        if dense:
            m = self._matrices["passages"]
            assert queries is not None
            d = [m[p].astype(np.float32, copy=False) @ queries[i] for i, p in enumerate(positions)]
        if bm25:
            b = [self.bm25_scores_at("passages", t, p) for t, p in zip(texts, positions, strict=True)]
        return d, b

    def warmup(self) -> bool:
        """Load every index this shard has (a first query then costs what the hundredth does)."""
        if self.manifest.bm25 is not None:
            for idx in self._bm25.values():
                idx.scores("warm up")
        if self.manifest.models:
            _ = (self._faiss, self._matrices)
        return True
