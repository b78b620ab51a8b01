"""What every adapter searches: a local collection or a ``hiera serve`` behind :class:`~hiera.client.HieraClient`.

The LangChain and LlamaIndex retrievers and the MCP server take either, and
see one interface (:class:`Source`): ``search``, ``answer``, ``document``,
``methods``. Method parameters are checked against the registry
(:mod:`hiera.spec`) before any search, the way ``--set`` and ``/search`` check
them, and every hit becomes the same metadata (:func:`hit_metadata`) in every
framework.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any, Protocol, TypeVar

from hiera.client import HieraClient
from hiera.errors import BadInputError, CollectionChangedError, HieraError
from hiera.results import Hit, Results, check_k, check_level
from hiera.spec import METHODS, Level, method, methods_json, reader_spec

T = TypeVar("T")


def hit_metadata(hit: Hit, results: Results) -> dict[str, Any]:
    """A hit's provenance as framework metadata: ids, breadcrumb, final and per-stage scores, set evidence.

    Plain JSON values only (vector stores and tracers serialize metadata). For
    a set query (``sets``) a hit says whether it is a member of the answer set,
    and ``support`` maps each constraint it satisfies to the sentence of its
    document that says so.
    """
    meta: dict[str, Any] = {
        "doc_id": hit.doc_id,
        "passage_id": hit.passage_id,
        "title": hit.title,
        "section_path": list(hit.section_path),
        "breadcrumb": hit.breadcrumb(),
        "rank": hit.rank,
        "score": hit.score,
        "stages": {name: {"score": s.score, "rank": s.rank} for name, s in hit.stages.items()},
        "reason": hit.reason(),
        "method": results.retriever,
        "level": results.level,
    }
    if results.answer_set is not None:
        meta["in_answer_set"] = hit.doc_id in results.answer_set
        meta["support"] = dict(hit.support)
        meta["evidence"] = list(hit.evidence)
    return meta


def check_request(name: str, k: int, level: Level | None, params: dict[str, Any]) -> dict[str, Any]:
    """The method's parameters by canonical name, checked; a bad name, type, bound, k or level is one line."""
    spec = method(name)
    check_k(k)
    if level is not None:
        check_level(name, spec.levels, level)
    return spec.check(params)


class Source(Protocol):
    """A collection to search, wherever it is."""

    name: str

    def search(self, query: str, k: int, method: str, level: Level | None, params: dict[str, Any],
               filter: str | None = None) -> Results: ...

    def answer(self, query: str, k: int, method: str, params: dict[str, Any], read: dict[str, Any],
               filter: str | None = None) -> dict[str, Any]: ...

    def reader_defaults(self) -> dict[str, Any]:
        """The reader's decoding as it answers when a request sets nothing (its calibration included); {} without one."""
        ...

    def can_answer(self) -> bool: ...

    def document(self, doc_id: str) -> dict[str, Any]: ...

    def methods(self) -> list[dict[str, Any]]: ...

    def available(self) -> list[str]: ...


class LocalSource:
    """A collection directory (or an opened :class:`~hiera.collection.Collection`), with an optional reader."""

    def __init__(self, collection: Any, reader: str | Path | None = None) -> None:
        """``reader``: a reader directory (``hiera train-reader``) for ``answer``; loaded before anything else."""
        self.reader = None
        if reader is not None:
            from hiera.read.reader import Reader

            self.reader = Reader(reader)
        self._root: Path | None = None  # a directory: followed to each newer build; an opened collection is kept
        if isinstance(collection, str | os.PathLike):
            from hiera.builds import open_collection

            self._root = Path(collection)
            collection = open_collection(collection)
        self.col = collection
        self.name = Path(getattr(collection, "root", "collection")).name
        self._retrievers: dict[str, Any] = {}
        self._lock = threading.Lock()

    def _follow(self) -> None:
        """Open the newer build when one went live since this one (a changed corpus version: one SQL read; a
        rebuild, a compaction or ``hiera tune``: one readlink), as ``hiera serve`` does: a source made from a
        directory answers from the collection as it is now. While documents are ingested but not yet built, the
        reopen fails in one line (``run hiera build``) rather than answer from an older state."""
        col = self.col
        if self._root is None:
            return
        from hiera.index.publish import live_build_dir

        if col.store.version == col.manifest.corpus_version and live_build_dir(self._root) in (None, col.build_dir):
            return
        from hiera.builds import open_collection

        with self._lock:
            if self.col is col:
                # the old collection is not closed here: a search in another thread may still read it; it lets its
                # build go when the last of them drops it
                self.col, self._retrievers = open_collection(self._root), {}

    def available(self) -> list[str]:
        return [n for n, s in METHODS.items() if set(s.requires) <= set(self.col.built)]

    def _retriever(self, name: str) -> Any:
        with self._lock:
            if name not in self._retrievers:
                spec = method(name)
                missing = sorted(set(spec.requires) - set(self.col.built))
                if missing:
                    raise HieraError(f"retriever {name!r} needs the {' and '.join(missing)} index, which this "
                                     f"collection was built without; available: {', '.join(self.available())}")
                from hiera.retrieve import get_retriever

                self._retrievers[name] = get_retriever(name, self.col)
            return self._retrievers[name]

    def _followed(self, run: Callable[[], T]) -> T:
        """``run()`` on the live build; once more on the next one when another process removed what it found while
        it ran (a directory source; an opened collection is a snapshot and says so)."""
        self._follow()
        try:
            return run()
        except CollectionChangedError:
            if self._root is None:
                raise
            self._follow()
            return run()

    def search(self, query: str, k: int, method: str, level: Level | None, params: dict[str, Any],
               filter: str | None = None) -> Results:
        checked = check_request(method, k, level, params)
        return self._followed(lambda: self._retriever(method).search(
            query, k=k, level=level, **({"filter": filter} if filter else {}), **checked))

    def can_answer(self) -> bool:
        return self.reader is not None

    def answer(self, query: str, k: int, method: str, params: dict[str, Any], read: dict[str, Any],
               filter: str | None = None) -> dict[str, Any]:
        if self.reader is None:
            raise HieraError("no reader: give one (a hiera train-reader directory) to answer questions")
        from hiera.read.pipeline import answer

        checked = check_request(method, k, "passage", params)
        reader = self.reader
        out = self._followed(lambda: answer(self._retriever(method), reader, query, k=k,
                                            search_params={**checked, **({"filter": filter} if filter else {})},
                                            read_params=reader_spec().check(read), sep=self.col.store.title_sep))
        return out.to_dict()

    def reader_defaults(self) -> dict[str, Any]:
        return {} if self.reader is None else {n: v for n, v in self.reader.defaults.items() if n != "reader"}

    def document(self, doc_id: str) -> dict[str, Any]:
        from hiera.corpus.view import document_view

        store = self.col.store
        doc = store.find_document(doc_id)
        if doc is None:
            raise BadInputError(f"no document with id or title {doc_id!r}")
        return document_view(store, doc)

    def methods(self) -> list[dict[str, Any]]:
        have = set(self.available())
        out = []
        for m in methods_json():
            if m["kind"] == "reader":
                m["available"] = self.reader is not None
            else:
                m["available"] = m["name"] in have
            out.append(m)
        return out


class RemoteSource:
    """A ``hiera serve`` reached through a :class:`~hiera.client.HieraClient`."""

    def __init__(self, client: HieraClient) -> None:
        self.client = client
        self.name = client.url
        self._health: dict[str, Any] | None = None

    def _served(self) -> dict[str, Any]:
        if self._health is None:
            self._health = self.client.health()
        return self._health

    def available(self) -> list[str]:
        return list(self._served().get("retrievers") or [])

    def search(self, query: str, k: int, method: str, level: Level | None, params: dict[str, Any],
               filter: str | None = None) -> Results:
        checked = check_request(method, k, level, params)
        return self.client.search(query, k, retriever=method, level=level, filter=filter or None, **checked)

    def can_answer(self) -> bool:
        return self._served().get("reader") is not None

    def reader_defaults(self) -> dict[str, Any]:
        reader = self._served().get("reader") or {}
        return {n: v for n, v in (reader.get("params") or {}).items() if n != "reader"}

    def answer(self, query: str, k: int, method: str, params: dict[str, Any], read: dict[str, Any],
               filter: str | None = None) -> dict[str, Any]:
        checked = check_request(method, k, "passage", params)
        got = self.client.answer(query, k, retriever=method, filter=filter or None, **checked,
                                 **reader_spec().check(read))
        return {"question": got.question, "answers": [asdict(a) for a in got.answers],
                "passages": [h.to_dict() for h in got.results.hits], "retriever": got.results.retriever,
                "params": got.results.params, "reader": got.reader, "trace": [asdict(t) for t in got.trace]}

    def document(self, doc_id: str) -> dict[str, Any]:
        return self.client.document(doc_id)

    def methods(self) -> list[dict[str, Any]]:
        return self.client.methods()


def open_source(target: Any, reader: str | Path | None = None) -> Source:
    """A :class:`Source` for a collection directory, an opened collection, a :class:`HieraClient` or a server URL."""
    if isinstance(target, LocalSource | RemoteSource):
        return target
    if isinstance(target, HieraClient):
        if reader is not None:
            raise BadInputError("a server's reader is chosen when it starts (hiera serve --reader DIR)")
        return RemoteSource(target)
    if isinstance(target, str) and target.startswith(("http://", "https://")):
        return open_source(HieraClient(target), reader)
    if isinstance(target, str | os.PathLike) or (hasattr(target, "store") and hasattr(target, "built")):
        return LocalSource(target, reader=reader)
    raise BadInputError(
        f"cannot search {type(target).__name__}: give a collection directory, an opened collection, "
        "a hiera.client.HieraClient or a server URL"
    )
