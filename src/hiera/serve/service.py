"""What a server loads once: the collection, one retriever per method, and the document view.

The :class:`~hiera.collection.Collection` and one instance of every retriever
are created once, when the app is made, so a request only pays for its own
search and a wrong directory or a stale index fails at start-up; the slow
loading (FAISS, BM25 matrices, encoder weights) happens in
:meth:`Service.warmup`, which the app's lifespan runs before uvicorn accepts
connections, so the first search is as fast as the hundredth. A build swapped
in later is picked up by :meth:`Service.refresh` without a restart.
"""

from __future__ import annotations

import gc
import logging
import threading
import time
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hiera.builds import open_collection
from hiera.collection import Collection
from hiera.corpus.tree import Document
from hiera.corpus.view import document_view
from hiera.errors import HieraError
from hiera.index.manifest import read_tuned
from hiera.index.publish import live_build_dir
from hiera.retrieve import get_retriever
from hiera.retrieve.protocol import Retriever
from hiera.spec import MAX_K, MAX_QUERY_CHARS, METHODS, READERS
from hiera.version import __version__

log = logging.getLogger("hiera.serve")


class Service:
    """What the app loads once: the collection, its retrievers and what they can serve."""

    def __init__(
        self, root: Path, reranker: Path | None = None, rerank_depth: int = 20, vectors: str = "float16",
        opener: Callable[..., Collection] = open_collection, reader: Path | None = None, device: str = "auto",
    ) -> None:
        """``opener(root, vectors=…)`` opens the collection (Ray Serve's router passes one whose shards are remote).

        ``reader``: a reader directory (``hiera train-reader``) for ``/answer``; loaded before the collection,
        so a wrong directory fails at start-up.
        """
        self.root = Path(root)
        self.reader = None
        if reader is not None:
            from hiera.read.reader import Reader

            self.reader = Reader(reader, device=device)
        self.vectors = vectors
        self.opener = opener
        self.reranker = None
        self.rerank_depth = rerank_depth
        if reranker is not None:
            from hiera.crossencoder import MAX_DEPTH, Reranker

            if not 1 <= rerank_depth <= MAX_DEPTH:
                raise HieraError(f"--rerank-depth must be in 1..{MAX_DEPTH}, got {rerank_depth}")
            self.reranker = Reranker(reranker, device=device)
        self.warm = False
        self.limits: dict[str, Any] = {}  # the server's own limits, shown by /health
        self.stale: str | None = None  # why searches are refused until the next build, if they are
        self._reload_lock = threading.Lock()
        self._checked = time.monotonic()
        self._retired: list[weakref.ref[Collection]] = []  # builds served before, until nothing holds them
        self._serve(self.opener(self.root, vectors=vectors))

    def _serve(self, col: Collection) -> None:
        """Serve ``col``: one retriever per method its build can serve (a reference swap, so requests see one build)."""
        built = col.built
        missing = {n: sorted(set(s.requires) - built) for n, s in METHODS.items()}
        available = [n for n in METHODS if not missing[n]]
        retrievers: dict[str, Retriever] = {n: get_retriever(n, col) for n in available}
        self.col, self.missing, self.available, self.retrievers = col, missing, available, retrievers

    def refresh(self, every: float = 1.0, wait: bool = False) -> None:
        """Pick up a build swapped in since the last look (``hiera build``/``add``/``remove``), without a restart.

        A look (a readlink and the corpus version) at most once a second, and
        at once when the corpus version moved past the served build's (another
        process committed a change: the old build's rows may be gone). The new
        build is opened and warmed while the old one keeps answering. If
        documents were ingested but not yet built, searches are refused with a
        message saying so until a build arrives (the old index no longer
        describes the corpus).

        ``wait``: look now, waiting for a look already under way (the server's
        own write calls it so that the next request is answered from the build
        it published, not from the one a concurrent look had just opened).
        """
        now = time.monotonic()
        if not wait and now - self._checked < every and not self._moved():
            return
        self._free_retired()
        if not self._reload_lock.acquire(blocking=wait):
            return
        try:
            self._checked = now
            # three times at most: `add` and `remove` commit just after their swap, so a commit can land between the
            # look at the live build and the read of the corpus version; looking again serves the build it
            # committed instead of calling the collection stale
            for _ in range(3):
                if not self._follow_live_build():
                    return
                version = self.col.store.version
                if version == self.col.manifest.corpus_version:
                    self.stale = None
                    return
            self.stale = (
                f"documents were ingested into {self.root.name} after its index was built; "
                f"searches resume once `hiera build {self.root}` finishes"
            )
        finally:
            self._reload_lock.release()

    def _follow_live_build(self) -> bool:
        """Serve the live build if it is not the one served; False when the look failed (the reason is logged)."""
        try:
            live = live_build_dir(self.root)
        except HieraError as e:  # which build is live cannot be told now: keep answering from the open one
            log.warning("still serving build %s: %s", self.col.build_dir.name, e)
            return False
        if live is None or live == self.col.build_dir:
            return True
        try:
            col = self.opener(self.root, vectors=self.vectors)
        except HieraError as e:
            self.stale = f"the collection changed and its new index cannot be served ({e})"
            log.warning("%s", self.stale)
            return False
        if self.warm:
            col.warmup()
        self._retired.append(weakref.ref(self.col))
        self._serve(col)
        log.info("now serving build %s of %s", col.build_dir.name, self.root)
        return True

    def _free_retired(self) -> None:
        """Free the collections served before, once the searches that began on them are done.

        A collection's objects refer to each other (retrievers, derived indexes, the passage stage's scorer), so
        dropping the last reference leaves a cycle that only a full collection frees: until then its memory maps
        stay resident and its build stays held, and a server that saw six updates kept seven builds (about
        150 MB each on the demo) in memory and on disk. A collection still in use by a search is left for a
        later look."""
        if not self._retired:
            return
        gc.collect()
        self._retired = [r for r in self._retired if r() is not None]

    def _moved(self) -> bool:
        """Whether a change was committed since the served build (one SQL read; not while already stale)."""
        return self.stale is None and self.col.store.version != self.col.manifest.corpus_version

    def warmup(self) -> None:
        """Load every index and model and run one search per retriever (numba, BLAS, caches)."""
        t = time.perf_counter()
        self.col.warmup()
        for name, r in self.retrievers.items():
            try:
                r.search("warm up", k=1)
            except HieraError as e:  # e.g. a default doc stage whose index is missing
                log.warning("warm-up of %s failed: %s", name, e)
        self.warm = True
        log.info("warmed up %s in %.1f s", self.root, time.perf_counter() - t)

    def retriever(self, name: str, rerank: bool = False) -> Retriever:
        if rerank:
            if self.reranker is None:
                raise HieraError("this server was started without a reranker (hiera serve DIR --rerank MODEL)")
            from hiera.retrieve.rerank import RerankRetriever

            return RerankRetriever(self.retriever(name), self.reranker, depth=self.rerank_depth)
        if name in self.retrievers:
            return self.retrievers[name]
        valid = ", ".join(self.available)
        if name in self.missing:
            raise HieraError(
                f"retriever {name!r} needs the {' and '.join(self.missing[name])} index, which this collection "
                f"was built without; valid: {valid}"
            )
        raise HieraError(f"unknown retriever {name!r}; valid: {valid}")

    def health(self) -> dict[str, Any]:
        m = self.col.manifest
        return {
            "status": "ok",
            "version": __version__,
            "collection": self.root.name,
            "build": self.col.build_dir.name,
            "stale": self.stale,
            "warm": self.warm,
            "stats": self.col.store.stats(),
            "models": {level: {"name": info.get("name"), "fingerprint": str(info.get("fingerprint", ""))[:12],
                              "backend": m.backend(level)}
                       for level, info in m.models.items()},
            "retrievers": list(self.available),
            "device": self.col.placement.device,
            "dense_search": self.col.placement.dense_search,
            "passage_stage": self.col.passage_backend,
            "profile": m.profile or {"name": "small", "why": "built before profiles existed"},
            "defaults": dict(m.defaults),
            "tuned": read_tuned(self.col.build_dir),  # hiera tune's values, in force on top of the defaults
            "retriever_params": {n: _jsonable(r.defaults) for n, r in self.retrievers.items()},
            "retriever_levels": {n: list(METHODS[n].levels) for n in self.retrievers},
            "reranker": None
            if self.reranker is None
            else {"name": self.reranker.name, "threshold": self.reranker.threshold, "weight": self.reranker.weight,
                  "depth": self.rerank_depth},
            "reader": None if self.reader is None else {"name": self.reader.name, "params": _jsonable(self.reader.defaults)},
            "limits": {"k": MAX_K, "query_chars": MAX_QUERY_CHARS, **self.limits},
        }

    def methods(self) -> list[dict[str, Any]]:
        """The registry with this collection's effective defaults and what each method lacks here."""
        out = []
        for name, spec in METHODS.items():
            r = self.retrievers.get(name)
            defaults = r.defaults if r is not None else {**spec.defaults(), **self.col.method_defaults(name)}
            out.append({**spec.to_json(_jsonable(defaults)), "available": r is not None, "missing": self.missing[name]})
        for spec in READERS.values():  # kind "reader": /answer's parameters; missing when served without --reader
            defaults = self.reader.defaults if self.reader is not None else spec.defaults()
            out.append({**spec.to_json(_jsonable(defaults)), "available": self.reader is not None,
                        "missing": [] if self.reader is not None else ["reader"]})
        return out

    def answerer(self) -> Any:
        if self.reader is None:
            raise HieraError("this server was started without a reader (hiera serve DIR --reader DIR)")
        return self.reader


def _jsonable(d: dict[str, Any]) -> dict[str, Any]:
    return {k: v if isinstance(v, str | int | float | bool) or v is None else str(v) for k, v in d.items()}


# -- documents ---------------------------------------------------------------
def document_payload(service: Service, doc: Document) -> dict[str, Any]:
    """The title tree with each section's passages, as the web page's side panel shows it (:func:`document_view`)."""
    return document_view(service.col.store, doc)
