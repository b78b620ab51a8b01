"""A collection as retrievers, readers and the server see it: one protocol, two implementations.

:class:`Collection` lists exactly what the rest of hiera reads of an opened
collection: its sizes and layout (the one passage order every index shares),
its indexes (BM25, FAISS, vector matrices) by global position, its query
encoders, the scoring calls that several methods share, passage and document
hydration, and the method defaults its build carries. Nothing else is part of
the contract, so a retriever works on any implementation:

* :class:`LocalCollection`: the indexes of one build directory, loaded lazily
  and memory-mapped (opening costs milliseconds; a server pays for what it
  serves only once);
* :class:`hiera.shard.collection.ShardedCollection`: the same members answered
  by fanning out over shards, each a local index of its own (composition, as
  FAISS's ``IndexShards``).

Both *hold* a :class:`BuildView`, the part of a live build that is the same
either way (the corpus store, the checked manifest, the layout arrays, the
encoders, hydration, defaults), and expose its members through
:func:`on_view`; neither subclasses the other. :func:`hiera.builds.open_collection`
picks one from the build's manifest. This module imports nothing from
:mod:`hiera.shard`.
"""

from __future__ import annotations

import os
import threading
import weakref
from collections.abc import Callable, Iterator
from functools import cached_property
from pathlib import Path
from typing import Any, Protocol, TypeVar, runtime_checkable

import numpy as np

from hiera.backends import check_backend
from hiera.corpus.store import CorpusStore, DocRow
from hiera.corpus.tree import Passage
from hiera.encode import Encoder, model_fingerprint, resolve_model_path
from hiera.errors import (
    BadInputError,
    CollectionChangedError,
    HieraError,
    IndexMissingError,
    ManifestMismatchError,
)
from hiera.index.bm25 import Bm25Config, Bm25Index
from hiera.index.dense import faiss_search, load_faiss, load_matrix
from hiera.index.exact import Placement, TorchExactIndex, resolve_placement
from hiera.index.manifest import Manifest, read_tuned
from hiera.index.masked import bm25_top, vector_search
from hiera.index.names import NameTable
from hiera.index.passage_stage import (
    DocLists,
    HostPassageStage,
    PassageSpec,
    StageResult,
    TorchPassageStage,
    matrix_scorer,
)
from hiera.index.profile import profile_of
from hiera.index.publish import live_build_dir
from hiera.index.segments import (
    DELTA_DIR,
    SegmentedBm25,
    SegmentedIndex,
    SegmentedMatrix,
    SegmentedNames,
    dead_masks,
    open_names,
    read_tombstones,
)
from hiera.io import load_npy
from hiera.lock import hold_build
from hiera.query import Allowed, QueryBatch
from hiera.spec import method

VECTOR_DTYPES = ("float16", "float32")
T = TypeVar("T")


# -- what a collection offers ----------------------------------------------------------------------------------
class Bm25Searcher(Protocol):
    """A BM25 index by global position: top-k search and the full score vector."""

    size: int

    def search(self, query: str, k: int) -> tuple[np.ndarray, np.ndarray]: ...

    def scores(self, query: str) -> np.ndarray: ...

    def scores_at(self, query: str, positions: np.ndarray) -> np.ndarray: ...


class VectorIndex(Protocol):
    """A FAISS index, or anything shaped like one (exact torch search, a sharded fan-out)."""

    ntotal: int
    d: int

    def search(self, x: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]: ...


class VectorMatrix(Protocol):
    """Stored vectors by global position: integer-array gathers and slices (a float16 memmap, or shards)."""

    shape: tuple[int, ...]
    dtype: Any

    def __len__(self) -> int: ...

    def __getitem__(self, key: Any) -> np.ndarray: ...


@runtime_checkable
class Collection(Protocol):
    """What retrievers, readers, trainers and the server use of an opened collection.

    ``store`` and ``manifest`` are there for the tools that report on the
    collection (the server's health, training reports, ``hiera stats``);
    retrievers use the members below them.
    """

    root: Path
    build_dir: Path
    manifest: Manifest
    store: CorpusStore
    placement: Placement  # the device models run on, and how dense indexes are searched

    @property
    def n_docs(self) -> int: ...

    @property
    def n_passages(self) -> int: ...

    @property
    def built(self) -> set[str]: ...

    @property
    def has_dense(self) -> bool: ...

    @property
    def models(self) -> dict[str, dict[str, Any]]: ...

    @property
    def faiss_types(self) -> dict[str, str]: ...

    @property
    def profile(self) -> str: ...

    @property
    def title_sep(self) -> str: ...

    # layout: the one order of passages and documents
    @property
    def passage_rows(self) -> np.ndarray: ...

    @property
    def doc_rows(self) -> np.ndarray: ...

    @property
    def doc_offsets(self) -> np.ndarray: ...

    @property
    def passage_doc(self) -> np.ndarray: ...

    @property
    def live(self) -> Allowed | None:
        """The rows a search may return when documents were removed or replaced since the build was written."""
        ...

    # indexes, by global position
    @property
    def bm25_passages(self) -> Bm25Searcher: ...

    @property
    def bm25_docs(self) -> Bm25Searcher: ...

    @property
    def passage_faiss(self) -> VectorIndex: ...

    @property
    def doc_faiss(self) -> VectorIndex: ...

    @property
    def doc_mean_faiss(self) -> VectorIndex | None: ...

    @property
    def passage_vectors(self) -> VectorMatrix: ...

    @property
    def doc_vectors(self) -> VectorMatrix: ...

    @property
    def doc_mean_vectors(self) -> VectorMatrix: ...

    @property
    def passage_encoder(self) -> Encoder: ...

    @property
    def doc_encoder(self) -> Encoder: ...

    # scoring calls several methods share (a sharded collection answers each in one round trip per shard)
    def passage_lists(
        self, query: str, qp: np.ndarray, depth: int, allowed: Allowed | None = None
    ) -> tuple[tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]: ...

    def passage_scores(self, positions: np.ndarray, qp: np.ndarray) -> np.ndarray: ...

    def passage_stage(self, batch: QueryBatch, docs: DocLists, spec: PassageSpec) -> list[StageResult]:
        """DHR's passage stage for a batch: each query's documents' passages scored, fused, cut (:mod:`hiera.index.passage_stage`)."""
        ...

    @property
    def passage_backend(self) -> str: ...

    # hydration
    def passages_at(self, positions: np.ndarray | list[int]) -> list[Passage]: ...

    def docs_at(self, positions: np.ndarray | list[int]) -> list[DocRow]: ...

    def docs_by_position(self) -> list[DocRow | None]: ...

    def iter_docs(self, ids: list[str] | None = None) -> Iterator[DocRow]: ...

    def iter_passages(self, doc_ids: list[str] | None = None) -> Iterator[tuple[int, Passage]]: ...

    def doc_text(self, doc_id: str) -> str: ...

    # methods
    def method_defaults(self, name: str) -> dict: ...

    def check_method(self, name: str) -> None: ...

    def derived(self, key: str, make: Callable[[], T]) -> T: ...

    def name_index(self) -> tuple[NameTable | SegmentedNames | None, VectorIndex | None]: ...

    def warmup(self) -> None: ...

    def close(self) -> None:
        """Let go of the build (a writer may then remove it once it is no longer live); also on garbage collection
        and at a ``with`` block's end."""
        ...


def _all_found(found: dict[int, Any], rows: list[int], what: str) -> list[Any]:
    """``found``'s rows in ``rows``' order; a missing one means another process removed it since this build was opened."""
    missing = sum(1 for r in rows if r not in found)
    if missing:
        raise CollectionChangedError(
            f"{missing} {what}(s) this search found were removed from the collection while it ran "
            "(another process committed a change); search again (a collection kept open: open it again)"
        )
    return [found[r] for r in rows]


# -- the part of a live build every implementation shares ------------------------------------------------------
class BuildView:
    """A collection's live build without its indexes: store, checked manifest, layout, encoders, defaults.

    Opening it checks what makes a build unusable before any search: the
    manifest's format and files, the corpus version (documents ingested since
    the build), the requested models' fingerprints and the stored defaults.
    """

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
    ) -> None:
        if vectors not in VECTOR_DTYPES:
            raise BadInputError(f"vectors must be one of {', '.join(VECTOR_DTYPES)}, got {vectors!r}")
        self.root = Path(root)
        self.store = CorpusStore(self.root)
        self.closed = False
        self._let_go: weakref.finalize | None = None
        for attempt in range(3):
            self.build_dir = self._hold_live_build()
            build_dir = self.build_dir
            self.manifest = Manifest.read(build_dir)
            self.manifest.check_files(build_dir)
            version = self.store.version
            if self.manifest.corpus_version == version:
                break
            # `add` and `remove` swap their build in just before they commit: a commit that landed between the
            # look at the live build and the read of the version has its build live now, so look again
            if attempt < 2 and live_build_dir(self.root) != build_dir:
                self.release()
                continue
            raise ManifestMismatchError(
                f"the index of {self.root} was built at corpus version {self.manifest.corpus_version} but the corpus "
                f"is at version {version} (documents were ingested since); run `hiera build {self.root}`"
            )
        self._defaults = self._checked_defaults()
        self.mmap = mmap
        self.vectors = vectors
        self.cache_dir = cache_dir
        self.backend = check_backend(backend) if backend is not None else None
        self._requested = {"doc": doc_encoder, "passage": passage_encoder}
        for level, name in self._requested.items():
            if name is not None:
                self.manifest.check_model(level, model_fingerprint(resolve_model_path(name)), name)
        self._derived: dict[str, Any] = {}
        self._derived_lock = threading.Lock()
        # where the query encoders run (LocalCollection: on the GPU when it searches there); exported backends
        # run on the CPU whatever this says
        self.model_device = "cpu"

    def _hold_live_build(self, tries: int = 5) -> Path:
        """The live build, held open (:func:`hiera.lock.hold_build`) for as long as this view lives: a writer that
        publishes a newer build keeps this one until it is let go, so the index files searches load later are
        still there."""
        for _ in range(tries):
            build_dir = live_build_dir(self.root)
            if build_dir is None:
                raise IndexMissingError(f"{self.root} has no index; run `hiera build {self.root}`")
            held, fd = hold_build(build_dir)
            if held:
                self._let_go = weakref.finalize(self, os.close, fd) if fd is not None else None
                return build_dir
        raise CollectionChangedError(f"the build of {self.root} changed {tries} times while it was being opened; "
                                     "open it again")

    def release(self) -> None:
        """Let go of the build now rather than when this view is collected (idempotent)."""
        if self._let_go is not None:
            self._let_go()

    def close(self) -> None:
        """Let go of the build, the store's connections and what was derived from the build (idempotent).

        Searches refuse a closed collection: its build may be deleted by the next writer once let go.
        """
        self.closed = True
        self.release()
        with self._derived_lock:
            self._derived.clear()
        for name, value in vars(type(self)).items():  # the layout arrays and encoders it loaded
            if isinstance(value, cached_property):
                self.__dict__.pop(name, None)
        self.store.close_all()

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

    def derived(self, key: str, make: Callable[[], T]) -> T:
        """An object derived from this collection (the linking pipeline's alias index…), made once, dropped with it.

        Thread-safe: two first callers get the same object.
        """
        with self._derived_lock:
            if key not in self._derived:
                self._derived[key] = make()
            return self._derived[key]

    # -- sizes and build facts -------------------------------------------------------------------------------
    @property
    def n_docs(self) -> int:
        return int(self.manifest.documents)

    @property
    def n_passages(self) -> int:
        return int(self.manifest.passages)

    @property
    def has_dense(self) -> bool:
        return bool(self.manifest.models)

    @property
    def built(self) -> set[str]:
        """Index kinds this build has: ``bm25``, ``dense``."""
        return {k for k, ok in (("bm25", self.manifest.bm25 is not None), ("dense", self.has_dense)) if ok}

    @property
    def models(self) -> dict[str, dict[str, Any]]:
        """The encoders the build used, per level (name, path, fingerprint, dim, backend)."""
        return self.manifest.models

    @property
    def faiss_types(self) -> dict[str, str]:
        """The FAISS factory string of each dense index, per level."""
        return self.manifest.faiss

    @property
    def profile(self) -> str:
        """The build profile (``small`` or ``large``, :mod:`hiera.index.profile`): the default method follows it."""
        return profile_of(self.manifest.profile)

    @property
    def title_sep(self) -> str:
        return self.store.title_sep

    def need(self, what: str, present: bool) -> None:
        if not present:
            # the build left it out on purpose (--no-dense / --no-bm25): building again the same way would not help
            raise IndexMissingError(f"{self.root}: this build has no {what} index (it was built without it); "
                                    f"run `hiera build {self.root}` without --no-{what.lower()} to add it")

    # -- layout ----------------------------------------------------------------------------------------------
    @cached_property
    def passage_rows(self) -> np.ndarray:
        return load_npy(self.build_dir / "layout" / "passage_rows.npy", self.mmap)

    @cached_property
    def doc_rows(self) -> np.ndarray:
        return load_npy(self.build_dir / "layout" / "doc_rows.npy")

    @cached_property
    def doc_offsets(self) -> np.ndarray:
        return load_npy(self.build_dir / "layout" / "doc_offsets.npy")

    @cached_property
    def passage_doc(self) -> np.ndarray:
        """Document position of every passage position (derived, not stored)."""
        return np.repeat(np.arange(len(self.doc_rows), dtype=np.int32), np.diff(self.doc_offsets))

    @cached_property
    def dead_docs(self) -> np.ndarray:
        """Positions of the documents removed or replaced since the build's index files were written (tombstones)."""
        return read_tombstones(self.build_dir)

    @cached_property
    def live(self) -> Allowed | None:
        """The live documents and passages as a filter's masks; ``None`` when no row is tombstoned.

        Every search of a build with tombstones runs inside it (``compile_filter``
        and ``BaseRetriever.batch_search`` apply it), so no method returns a
        removed or superseded row.
        """
        dead = self.dead_docs
        if not len(dead):
            return None
        docs, passages = dead_masks(dead, self.doc_offsets)
        return Allowed(f"live rows of generation {self.manifest.updates.get('generation', 0)}", docs, passages)

    @property
    def delta(self) -> Path | None:
        """The delta segment's directory (documents added since the base was written), if the build has one."""
        return self.build_dir / DELTA_DIR if (self.manifest.updates or {}).get("delta") else None

    # -- encoders --------------------------------------------------------------------------------------------
    def _encoder(self, level: str) -> Encoder:
        self.need("dense", self.has_dense)
        info = self.manifest.models[level]
        name = self._requested[level] or info["path"]
        backend = self.backend or self.manifest.backend(level)
        device = self.model_device if backend == "torch" else "cpu"
        enc = Encoder(name, cache_dir=self.cache_dir, use_cache=False, backend=backend, device=device)
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
        models = self.manifest.models
        if models.get("doc", {}).get("fingerprint") == models.get("passage", {}).get("fingerprint"):
            return self.passage_encoder
        return self._encoder("doc")

    # -- hydration -------------------------------------------------------------------------------------------
    def passages_at(self, positions: np.ndarray | list[int]) -> list[Passage]:
        rows = [int(self.passage_rows[int(i)]) for i in positions]
        return _all_found(self.store.passages_by_rowid(rows), rows, "passage")

    def docs_at(self, positions: np.ndarray | list[int]) -> list[DocRow]:
        rows = [int(self.doc_rows[int(i)]) for i in positions]
        return _all_found(self.store.docs_by_rowid(rows), rows, "document")

    def docs_by_position(self) -> list[DocRow | None]:
        """Every document position's row, in layout order; ``None`` where the document was removed or replaced.

        Store order is layout order only for a build written from scratch: a
        changed build keeps dead positions and appends its delta, so tools that
        map positions to documents read them here.
        """
        found = self.store.docs_by_rowid([int(r) for r in self.doc_rows])
        return [found.get(int(r)) for r in self.doc_rows]

    def iter_docs(self, ids: list[str] | None = None) -> Iterator[DocRow]:
        """Documents (all, in store order, or those with ``ids``) with their titles and summaries."""
        return self.store.iter_docs(ids)

    def iter_passages(self, doc_ids: list[str] | None = None) -> Iterator[tuple[int, Passage]]:
        """``(row id, passage)`` of every passage (or of the documents ``doc_ids``), in store order."""
        return self.store.iter_passages(doc_ids)

    def doc_text(self, doc_id: str) -> str:
        """The document's title, a newline, then its full text."""
        return self.store.doc_fulltext(doc_id)

    def name_index(self) -> tuple[NameTable | SegmentedNames | None, VectorIndex | None]:
        """The build's name table and the FAISS index over its names' vectors (:mod:`hiera.index.names`).

        ``(None, None)`` for a build made without one (an older layout, or ``--no-names``);
        the index is ``None`` when the build has no dense vectors. Loaded once, memory-mapped.
        """
        return self.derived("hiera.index.names", self._load_names)

    def _load_names(self) -> tuple[NameTable | SegmentedNames | None, VectorIndex | None]:
        cfg = Bm25Config.from_dict(self.manifest.bm25) if self.manifest.bm25 else None
        return open_names(self.build_dir, self.manifest, cfg, mmap=self.mmap)

    def warmup(self) -> None:
        _ = (self.passage_rows, self.doc_rows, self.doc_offsets, self.passage_doc)
        if self.has_dense:
            self.passage_encoder.encode_query("warm up")
            self.doc_encoder.encode_query("warm up")


VIEW_MEMBERS = (
    "root", "build_dir", "manifest", "store", "mmap", "vectors", "n_docs", "n_passages", "has_dense", "built",
    "models", "faiss_types", "profile", "title_sep", "passage_rows", "doc_rows", "doc_offsets", "passage_doc",
    "dead_docs", "live", "delta", "passage_encoder", "doc_encoder", "passages_at", "docs_at", "docs_by_position", "iter_docs", "iter_passages", "doc_text",
    "method_defaults", "derived", "name_index",
)


def on_view(cls: type[T]) -> type[T]:
    """Answer every :data:`VIEW_MEMBERS` member of ``cls`` with its ``view`` (a :class:`BuildView`): composition.

    ``close()`` and ``with`` close the view (:meth:`BuildView.close`) and drop the indexes the collection loaded
    (its cached properties), so their memory maps and file handles go now even while something still refers to
    the collection; ``closed`` says so, and searches then refuse it.
    """
    for name in VIEW_MEMBERS:
        setattr(cls, name, property(lambda self, _n=name: getattr(self.view, _n), doc=f"the build view's {name}"))
    loaded = [n for n, v in vars(cls).items() if isinstance(v, cached_property)]

    def close(self: Any) -> None:
        self.view.close()
        for n in loaded:
            self.__dict__.pop(n, None)

    cls.close = close  # type: ignore[attr-defined]
    cls.closed = property(lambda self: self.view.closed, doc="whether close() was called")  # type: ignore[attr-defined]
    cls.__enter__ = lambda self: self  # type: ignore[attr-defined]
    cls.__exit__ = lambda self, *exc: self.close()  # type: ignore[attr-defined]
    return cls


def score_rows(matrix: VectorMatrix, positions: np.ndarray, q: np.ndarray) -> np.ndarray:
    """``matrix[positions] · q`` in float32: the stored vectors of some rows scored against one query."""
    return matrix[positions].astype(np.float32, copy=False) @ q


# -- one build directory ---------------------------------------------------------------------------------------
@on_view
class LocalCollection:
    """The indexes of one (unsharded) build, loaded lazily; the :class:`Collection` retrievers usually read."""

    def __init__(self, root: str | Path, *, device: str = "auto", dense_search: str = "auto", **options: Any) -> None:
        """``options`` open the :class:`BuildView` (``doc_encoder``, ``passage_encoder``, ``mmap``, ``cache_dir``,
        ``vectors``, ``backend``).

        ``backend`` runs the query encoders (:mod:`hiera.backends`); default:
        the one the build encoded with. ``device`` is where models (and exact
        scans) run: ``cpu``, ``cuda``, ``auto`` (``cuda`` when torch sees a
        GPU). ``dense_search`` is how dense indexes are searched: ``faiss``
        (the indexes as built), ``exact`` (every vector scanned with torch on
        the device, :mod:`hiera.index.exact`), ``auto`` (``exact`` on ``cuda``,
        else ``faiss``). Both are resolved here, once; :attr:`placement` says which.

        ``vectors="float32"`` upcasts the stored float16 vector matrices once,
        into memory. It doubles their size and drops the mmap, but DHR's
        passage stage and the dense document stages then skip a float16 →
        float32 conversion on every query (about 30% of a DHR search with an
        HNSW document index at 1M passages, bench/scale.py).
        """
        self.view = BuildView(root, **options)
        if self.view.manifest.shards:
            raise ManifestMismatchError(
                f"the live build of {self.view.root} is sharded; open it with hiera.builds.open_collection"
            )
        self.placement = resolve_placement(device, dense_search)
        self.view.model_device = self.placement.device

    def check_method(self, name: str) -> None:
        """Every registry method runs on one build."""

    # -- BM25 ------------------------------------------------------------------------------------------------
    @cached_property
    def bm25_passages(self) -> Bm25Index:
        return self._bm25("bm25-passages")

    @cached_property
    def bm25_docs(self) -> Bm25Index:
        return self._bm25("bm25-docs")

    def _bm25(self, name: str) -> Bm25Index | SegmentedBm25:
        m = self.view.manifest
        self.view.need("BM25", m.bm25 is not None)
        cfg = Bm25Config.from_dict(m.bm25 or {})
        base = Bm25Index.load(self.view.build_dir / name, cfg, mmap=self.view.mmap)
        delta = self.view.delta
        if delta is None or not (delta / name).exists():
            return base
        return SegmentedBm25(base, Bm25Index.load(delta / name, cfg, mmap=self.view.mmap))

    # -- dense -----------------------------------------------------------------------------------------------
    def _matrix(self, name: str) -> np.ndarray | SegmentedMatrix:
        self.view.need("dense", self.view.has_dense)
        delta = self.view.delta
        paths = [self.view.build_dir / "dense" / name] + ([delta / "dense" / name] if delta is not None else [])
        parts = [load_matrix(p, self.view.mmap) for p in paths]
        if self.view.vectors == "float32":  # plain in-memory arrays (astype would keep the memmap class)
            parts = [np.array(p, dtype=np.float32) for p in parts]
        return parts[0] if len(parts) == 1 else SegmentedMatrix(parts)

    @cached_property
    def passage_vectors(self) -> np.ndarray:
        return self._matrix("passages.f16.npy")

    @cached_property
    def doc_vectors(self) -> np.ndarray:
        return self._matrix("docs.f16.npy")

    @cached_property
    def doc_mean_vectors(self) -> np.ndarray:
        return self._matrix("docs-mean.f16.npy")

    def _faiss(self, name: str, vectors: Callable[[], np.ndarray]) -> Any:
        """The FAISS index ``name``, or with a torch search device the exact index over the matrix that stands in.

        ``vectors`` is only called then (the matrix the collection already
        holds, not a second read of its file).
        """
        self.view.need("dense", self.view.has_dense)
        if self.placement.dense_search == "exact":
            return TorchExactIndex(np.asarray(vectors()), self.placement.device)
        base = load_faiss(self.view.build_dir / "dense" / name, self.view.mmap)
        delta = self.view.delta
        if delta is None:
            return base
        return SegmentedIndex(base, load_faiss(delta / "dense" / name, self.view.mmap))

    @cached_property
    def passage_faiss(self) -> Any:
        return self._faiss("passages.faiss", lambda: self.passage_vectors)

    @cached_property
    def doc_faiss(self) -> Any:
        return self._faiss("docs.faiss", lambda: self.doc_vectors)

    @cached_property
    def doc_mean_faiss(self) -> Any:
        """FAISS index over the mean vectors (None for builds made before it existed)."""
        self.view.need("dense", self.view.has_dense)
        if not (self.view.build_dir / "dense" / "docs-mean.faiss").exists():
            return None
        return self._faiss("docs-mean.faiss", lambda: self.doc_mean_vectors)

    # -- scoring calls several methods share -----------------------------------------------------------------
    def passage_lists(
        self, query: str, qp: np.ndarray, depth: int, allowed: Allowed | None = None
    ) -> tuple[tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]:
        """BM25's and the dense index's top ``depth`` passages, each as (positions, scores), best first.

        The methods that fuse the two lists ask for both at once, so that a
        sharded collection asks each shard once. ``allowed``: only the passages
        a filter allows (:mod:`hiera.index.masked`).
        """
        if allowed is not None:
            bm25 = bm25_top(self.bm25_passages, query, depth, allowed, "passage")
            ids, sc = vector_search(self.passage_faiss, lambda: self.passage_vectors, qp, depth, allowed, "passage")
        else:
            bm25 = self.bm25_passages.search(query, depth)
            ids, sc = faiss_search(self.passage_faiss, qp, depth)
        keep = ids[0] >= 0
        return bm25, (ids[0][keep].astype(np.int64), sc[0][keep])

    def passage_scores(self, positions: np.ndarray, qp: np.ndarray) -> np.ndarray:
        """The passage encoder's score of the passages at ``positions``: their stored vectors · the query."""
        return score_rows(self.passage_vectors, positions, qp)

    @cached_property
    def _passage_stage(self) -> HostPassageStage | TorchPassageStage:
        """The backend, chosen with the placement: torch on the device for exact search, numpy with FAISS.

        The stage reaches back into this collection through a weak reference: it is cached on the collection, and
        a strong one would make a cycle, so a dropped collection (its memory maps, its hold on the build) would
        wait for a full garbage collection instead of going at once.
        """
        me = weakref.ref(self)

        def bm25_at(query: str, positions: np.ndarray) -> np.ndarray:
            # a build without BM25 refuses the hybrid stage when it is asked for, not before
            return _alive(me).bm25_passages.scores_at(query, positions)

        if self.placement.dense_search == "exact" and self.view.has_dense:
            index = self.passage_faiss
            return TorchPassageStage(index.matrix, self.view.doc_offsets, self.placement.device, bm25_at)
        return HostPassageStage(self.view.doc_offsets, matrix_scorer(lambda: _alive(me).passage_vectors, bm25_at))

    @property
    def passage_backend(self) -> str:
        """``numpy`` or ``torch``: which backend runs DHR's passage stage (traces report it)."""
        return self._passage_stage.backend

    def passage_stage(self, batch: QueryBatch, docs: DocLists, spec: PassageSpec) -> list[StageResult]:
        """DHR's passage stage for a whole batch (:mod:`hiera.index.passage_stage`)."""
        stage = self._passage_stage
        qp = None
        if spec.dense:
            qp = batch.tensor("qp", stage.device) if isinstance(stage, TorchPassageStage) else batch.vector("qp")
        return stage.run(batch.texts, qp, docs, spec, batch.filter)

    def warmup(self) -> None:
        """Load what searches need, so the first request is not the slow one."""
        if self.view.manifest.bm25 is not None:
            self.bm25_passages.scores("warm up")
            self.bm25_docs.scores("warm up")
        if self.view.has_dense:
            _ = (self.passage_vectors, self.doc_vectors, self.passage_faiss, self.doc_faiss)
        self.view.warmup()


def _alive(ref: weakref.ref[LocalCollection]) -> LocalCollection:
    """The collection a cached helper of it refers to; it is alive whenever that helper runs, since only the
    collection holds the helper."""
    col = ref()
    if col is None:
        raise HieraError("this collection was freed; open it again")
    return col
