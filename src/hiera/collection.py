"""An opened collection: the corpus store plus its live, checked index build.

Everything heavy (BM25 matrices, FAISS indexes, vector matrices, encoders) is
loaded lazily and memory-mapped where the format allows, so opening a
collection costs milliseconds and a server pays for what it serves only once.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cached_property
from pathlib import Path

import numpy as np

from hiera.backends import check_backend
from hiera.corpus.store import CorpusStore, DocRow
from hiera.corpus.tree import Passage
from hiera.encode import Encoder, model_fingerprint, resolve_model_path
from hiera.errors import HieraError, IndexMissingError, ManifestMismatchError
from hiera.index.bm25 import Bm25Config, Bm25Index
from hiera.index.build import live_build_dir
from hiera.index.dense import faiss_search, load_faiss, load_matrix
from hiera.index.exact import TorchExactIndex, resolve_device
from hiera.index.manifest import Manifest, read_tuned
from hiera.spec import method

VECTOR_DTYPES = ("float16", "float32")


class Collection:
    """Read-only view used by retrievers, the CLI and the HTTP API."""

    def __new__(cls, root: str | Path | None = None, *args: object, **kwargs: object) -> Collection:
        """A sharded live build opens as :class:`hiera.shard.collection.ShardedCollection` (same interface)."""
        if cls is Collection and root is not None:
            from hiera.shard.layout import is_sharded

            if is_sharded(live_build_dir(Path(root))):
                from hiera.shard.collection import ShardedCollection

                return super().__new__(ShardedCollection)
        return super().__new__(cls)

    def __init__(
        self,
        root: str | Path,
        *,
        doc_encoder: str | None = None,
        passage_encoder: str | None = None,
        mmap: bool = True,
        cache_dir: Path | None = None,
        vectors: str = "float16",
        backend: str | None = None,
        device: str = "auto",
    ) -> None:
        """``backend`` runs the query encoders (:mod:`hiera.backends`); default: the one the build encoded with.

        ``device`` is where dense indexes are searched: ``faiss`` (the indexes
        as built), ``cuda`` or ``cpu`` (exact search with torch,
        :mod:`hiera.index.exact`), ``auto`` (``cuda`` when there is a GPU, else
        ``faiss``); :attr:`search_device` says which one was chosen.

        ``vectors="float32"`` upcasts the stored float16 vector matrices once, into memory.

        It doubles their size and drops the mmap, but DHR's passage stage and
        the dense document stages then skip a float16 → float32 conversion on
        every query (about 30% of a DHR search with an HNSW document index at
        1M passages, bench/scale.py). The default keeps them memory-mapped.
        """
        if vectors not in VECTOR_DTYPES:
            raise ValueError(f"vectors must be one of {', '.join(VECTOR_DTYPES)}, got {vectors!r}")
        self.root = Path(root)
        self.store = CorpusStore(self.root)
        build_dir = live_build_dir(self.root)
        if build_dir is None:
            raise IndexMissingError(f"{self.root} has no index; run `hiera build {self.root}`")
        self.build_dir = build_dir
        self.manifest = Manifest.read(build_dir)
        self.manifest.check_files(build_dir)
        if self.manifest.corpus_version != self.store.version:
            raise ManifestMismatchError(
                f"the index of {self.root} was built at corpus version {self.manifest.corpus_version} but the corpus "
                f"is at version {self.store.version} (documents were ingested since); run `hiera build {self.root}`"
            )
        self._defaults = self._checked_defaults()
        self.mmap = mmap
        self.vectors = vectors
        self.cache_dir = cache_dir
        self.backend = check_backend(backend) if backend is not None else None
        self.search_device = resolve_device(device)
        self._requested = {"doc": doc_encoder, "passage": passage_encoder}
        for level, name in self._requested.items():
            if name is not None:
                self.manifest.check_model(level, model_fingerprint(resolve_model_path(name)), name)

    # -- method defaults -------------------------------------------------
    def _checked_defaults(self) -> dict[str, dict]:
        """The build's (``hiera build --set``) then the tuned (``hiera tune``) parameters, checked by the registry."""
        merged: dict[str, dict] = {}
        for source, table in (("manifest", self.manifest.defaults), ("tuning file", read_tuned(self.build_dir))):
            for name, params in table.items():
                try:
                    merged[name] = {**merged.get(name, {}), **method(name).check(params)}
                except HieraError as e:
                    raise ManifestMismatchError(
                        f"the {source} of {self.build_dir} holds defaults this version of hiera refuses ({e}); "
                        f"rebuild with `hiera build {self.root}`"
                    ) from None
        return merged

    def method_defaults(self, name: str) -> dict:
        """Parameters this build sets for method ``name`` (on top of the registry's defaults)."""
        return dict(self._defaults.get(name, {}))

    def check_method(self, name: str) -> None:
        """Refuse a method this build cannot answer as documented (a sharded build refuses some; see hiera.shard)."""

    @property
    def built(self) -> set[str]:
        """Index kinds this build has: ``bm25``, ``dense``."""
        return {k for k, ok in (("bm25", self.manifest.bm25 is not None), ("dense", self.has_dense)) if ok}

    # -- layout ----------------------------------------------------------
    @cached_property
    def passage_rows(self) -> np.ndarray:
        return np.load(self.build_dir / "layout" / "passage_rows.npy", mmap_mode="r" if self.mmap else None)

    @cached_property
    def doc_rows(self) -> np.ndarray:
        return np.load(self.build_dir / "layout" / "doc_rows.npy")

    @cached_property
    def doc_offsets(self) -> np.ndarray:
        return np.load(self.build_dir / "layout" / "doc_offsets.npy")

    @cached_property
    def passage_doc(self) -> np.ndarray:
        """Document position of every passage position (derived, not stored)."""
        return np.repeat(np.arange(len(self.doc_rows), dtype=np.int32), np.diff(self.doc_offsets))

    @property
    def n_docs(self) -> int:
        return int(self.manifest.documents)

    @property
    def n_passages(self) -> int:
        return int(self.manifest.passages)

    # -- BM25 -----------------------------------------------------------
    def _need(self, what: str, present: bool) -> None:
        if not present:
            raise IndexMissingError(f"{self.root}: the {what} index was not built; run `hiera build {self.root}`")

    @cached_property
    def bm25_passages(self) -> Bm25Index:
        self._need("BM25", self.manifest.bm25 is not None)
        return Bm25Index.load(self.build_dir / "bm25-passages", Bm25Config.from_dict(self.manifest.bm25), mmap=self.mmap)

    @cached_property
    def bm25_docs(self) -> Bm25Index:
        self._need("BM25", self.manifest.bm25 is not None)
        return Bm25Index.load(self.build_dir / "bm25-docs", Bm25Config.from_dict(self.manifest.bm25), mmap=self.mmap)

    # -- dense ----------------------------------------------------------
    @property
    def has_dense(self) -> bool:
        return bool(self.manifest.models)

    def _matrix(self, name: str) -> np.ndarray:
        stored = load_matrix(self.build_dir / "dense" / name, self.mmap)
        if self.vectors == "float16":
            return stored
        return np.array(stored, dtype=np.float32)  # a plain in-memory array (astype would keep the memmap class)

    @cached_property
    def passage_vectors(self) -> np.ndarray:
        self._need("dense", self.has_dense)
        return self._matrix("passages.f16.npy")

    @cached_property
    def doc_vectors(self) -> np.ndarray:
        self._need("dense", self.has_dense)
        return self._matrix("docs.f16.npy")

    @cached_property
    def doc_mean_vectors(self) -> np.ndarray:
        self._need("dense", self.has_dense)
        return self._matrix("docs-mean.f16.npy")

    @cached_property
    def doc_mean_faiss(self):
        """FAISS index over the mean vectors (None for builds made before it existed)."""
        self._need("dense", self.has_dense)
        path = self.build_dir / "dense" / "docs-mean.faiss"
        if not path.exists():
            return None
        return self._exact(lambda: self.doc_mean_vectors) or load_faiss(path, self.mmap)

    @cached_property
    def passage_faiss(self):
        self._need("dense", self.has_dense)
        return self._exact(lambda: self.passage_vectors) or load_faiss(self.build_dir / "dense" / "passages.faiss", self.mmap)

    @cached_property
    def doc_faiss(self):
        self._need("dense", self.has_dense)
        return self._exact(lambda: self.doc_vectors) or load_faiss(self.build_dir / "dense" / "docs.faiss", self.mmap)

    def _exact(self, vectors: Callable[[], np.ndarray]) -> TorchExactIndex | None:
        """With a torch search device, the exact index over the collection's vector matrix stands in for FAISS.

        ``vectors`` is only called then (the matrix the collection already
        holds, not a second read of its file).
        """
        if self.search_device == "faiss":
            return None
        return TorchExactIndex(vectors(), self.search_device)

    def _encoder(self, level: str) -> Encoder:
        self._need("dense", self.has_dense)
        info = self.manifest.models[level]
        name = self._requested[level] or info["path"]
        backend = self.backend or self.manifest.backend(level)
        enc = Encoder(name, cache_dir=self.cache_dir, use_cache=False, backend=backend)
        if enc.fingerprint != info["fingerprint"]:
            raise ManifestMismatchError(
                f"the model at {enc.path} changed since the {level} index was built "
                f"(fingerprint {enc.fingerprint[:12]} ≠ {info['fingerprint'][:12]}); rebuild with `hiera build`"
            )
        return enc

    @cached_property
    def passage_encoder(self) -> Encoder:
        return self._encoder("passage")

    @cached_property
    def doc_encoder(self) -> Encoder:
        if self.manifest.models.get("doc", {}).get("fingerprint") == self.manifest.models.get("passage", {}).get(
            "fingerprint"
        ):
            return self.passage_encoder
        return self._encoder("doc")

    # -- scoring primitives that several methods share ---------------------
    def passage_lists(
        self, query: str, qp: np.ndarray, depth: int
    ) -> tuple[tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]:
        """BM25's and the dense index's top ``depth`` passages, each as (positions, scores), best first.

        The methods that fuse the two lists ask for both at once, so that a
        sharded collection (:mod:`hiera.shard`) asks each shard once.
        """
        bm25 = self.bm25_passages.search(query, depth)
        ids, sc = faiss_search(self.passage_faiss, qp, depth)
        keep = ids[0] >= 0
        return bm25, (ids[0][keep].astype(np.int64), sc[0][keep])

    def passage_scores(self, positions: np.ndarray, qp: np.ndarray) -> np.ndarray:
        """The passage encoder's score of the passages at ``positions``: their stored vectors · the query."""
        return self.passage_vectors[positions].astype(np.float32, copy=False) @ qp

    def passage_bm25_scores(self, positions: np.ndarray, query: str) -> np.ndarray:
        """BM25 scores of the passages at ``positions`` (DHR's hybrid passage stage)."""
        return self.bm25_passages.scores(query)[positions]

    # -- provenance -----------------------------------------------------
    def passages_at(self, positions: np.ndarray | list[int]) -> list[Passage]:
        rows = [int(self.passage_rows[int(i)]) for i in positions]
        found = self.store.passages_by_rowid(rows)
        return [found[r] for r in rows]

    def docs_at(self, positions: np.ndarray | list[int]) -> list[DocRow]:
        rows = [int(self.doc_rows[int(i)]) for i in positions]
        found = self.store.docs_by_rowid(rows)
        return [found[r] for r in rows]

    def warmup(self) -> None:
        """Load what searches need, so the first request is not the slow one."""
        if self.manifest.bm25 is not None:
            self.bm25_passages.scores("warm up")
            self.bm25_docs.scores("warm up")
        if self.has_dense:
            _ = (self.passage_vectors, self.doc_vectors, self.passage_faiss, self.doc_faiss, self.passage_doc)
            self.passage_encoder.encode_query("warm up")
            self.doc_encoder.encode_query("warm up")
