"""A collection directory's builds: open the live one, make a new one — local or sharded, as the build says.

The one place that knows both kinds of build, so that the core
(:mod:`hiera.collection`, :mod:`hiera.index`, :mod:`hiera.check`) never
imports :mod:`hiera.shard`, and a caller never has to choose:

* :func:`open_collection` reads the live build's manifest and opens a
  :class:`~hiera.collection.LocalCollection` or a
  :class:`~hiera.shard.collection.ShardedCollection` (FAISS's ``read_index``
  returns the index class its file describes, the same way);
* :func:`build_collection` writes a new build with the local writer
  (:mod:`hiera.index.build`) or, for ``--shards N`` / ``--engine ray``, the
  sharded one (:mod:`hiera.shard.build`); both publish through
  :mod:`hiera.index.publish`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from hiera.collection import Collection, LocalCollection
from hiera.corpus.store import CorpusStore, IngestReport, RemoveReport
from hiera.errors import BadInputError, ManifestMismatchError
from hiera.index.build import BuildOptions, build
from hiera.index.manifest import Manifest, is_sharded
from hiera.index.publish import live_build_dir, remove_unused_builds
from hiera.index.segments import COMPACT_AT
from hiera.index.update import needs_rebuild, plan_change, update
from hiera.lock import writer_lock
from hiera.shard.build import build_sharded
from hiera.shard.collection import ShardedCollection


def open_collection(root: str | Path, **options: Any) -> Collection:
    """The collection at ``root``, opened on its live build (sharded or not), checked against its manifest.

    ``options``: ``device``, ``vectors``, ``backend``, ``doc_encoder``,
    ``passage_encoder``, ``mmap``, ``cache_dir`` (see :class:`LocalCollection`);
    ``fanout`` for a sharded build whose shards run elsewhere (Ray Serve).
    """
    if is_sharded(live_build_dir(Path(root))):
        return ShardedCollection(root, **options)
    if options.pop("fanout", None) is not None:
        raise ManifestMismatchError(f"the live build of {root} is not sharded: there are no shards to fan out to")
    return LocalCollection(root, **options)


def build_collection(
    root: str | Path,
    options: BuildOptions | None = None,
    log: Callable[[str], None] = print,
    store: CorpusStore | None = None,
) -> Manifest:
    """Build the collection at ``root`` (sharded when ``options`` ask for shards or Ray) and publish it."""
    opts = options or BuildOptions()
    if opts.shards or opts.engine != "local":
        return build_sharded(root, opts, log=log, store=store)
    return build(root, opts, log=log, store=store)


def update_collection(
    root: str | Path, store: CorpusStore, log: Callable[[str], None] = print, device: str = "auto",
    compact: bool = False, progress: bool = True, compact_at: float = COMPACT_AT,
) -> Manifest:
    """Publish the build that serves ``store``'s state (documents removed, replaced, added) from the live build.

    Called inside the change's store transaction. A delta segment and
    tombstones (:mod:`hiera.index.update`) unless the change must rewrite the
    build; a sharded build gaining text is rebuilt by its own writer, every
    vector reused.
    """
    root = Path(root)
    live = live_build_dir(root)
    if live is not None:
        m = Manifest.read(live)
        if m.shards and needs_rebuild(plan_change(store, live, m), m, compact, compact_at) is not None:
            opts = BuildOptions.from_manifest(m)
            opts.device, opts.progress = device, progress
            return build_sharded(root, opts, log=log, store=store)
    return update(root, store, log=log, device=device, compact=compact, progress=progress, compact_at=compact_at)


def add_documents(
    root: str | Path, sources: Sequence[str | Path], fmt: str, *, rules: Any = None, skip_bad: bool = False,
    duplicates: str = "merge", log: Callable[[str], None] = print, device: str = "auto", progress: bool = True,
    compact_at: float = COMPACT_AT, command: str = "hiera add",
) -> IngestReport:
    """Add or replace documents of an indexed collection: ``hiera add`` from Python.

    The documents and the build that serves them (:func:`update_collection`) commit in one transaction, under the
    writer lock, which then stays held while the builds no reader holds any more are removed, so a program that
    adds again and again keeps one build on disk, not one per call. A failure or a kill before the commit leaves
    the collection exactly as it was.
    """
    from hiera.corpus.ingest import ingest

    root = Path(root)
    if isinstance(sources, str | Path):  # one file: a str is a sequence of characters too
        sources = [sources]
    CorpusStore(root)  # no collection: refused before a lock file is created
    if live_build_dir(root) is None:
        raise BadInputError(f"{root} has no index yet; use `hiera ingest` then `hiera build`")
    with writer_lock(root, command):
        report = ingest(
            sources, fmt, root, rules=rules, skip_bad=skip_bad, progress=progress, duplicates=duplicates,
            before_commit=lambda store: update_collection(root, store, log=log, device=device, compact_at=compact_at,
                                                          progress=progress),
        )
        remove_unused_builds(root)
    return report


def select_documents(root: str | Path, ids: Sequence[str] = (), titles: Sequence[str] = (), source: str | None = None,
                     filter: str | None = None) -> list[str]:
    """The ids of the documents ``hiera remove`` names: by id, by title (or redirect), by source, by filter.

    Every selector must match: an unknown title, or a source or filter that
    matches no live document, is refused in one line (nothing is removed).
    """
    from hiera.index.filters import compile_filter, quote

    out = list(ids)
    store = CorpusStore(Path(root))
    for t in titles:
        doc = store.resolve_title(t)
        if doc is None:
            raise BadInputError(f"no document has the title or redirect {t!r}; nothing removed")
        out.append(doc)
    exprs = [e for e in ((f"source = {quote(source)}" if source else None), filter) if e]
    if exprs:
        with open_collection(root) as col:  # let go of the build now: the removal's writer may then delete it
            for expr in exprs:
                allowed = compile_filter(col, expr)
                if allowed.n_docs == 0:
                    raise BadInputError(f"the filter {expr!r} matches no document; nothing removed")
                out.extend(r.id for r in col.docs_at(allowed.doc_positions))
    if not out:
        raise BadInputError("name the documents to remove: --ids, --titles, --source or --filter")
    return list(dict.fromkeys(out))


def remove_documents(root: str | Path, doc_ids: Sequence[str], log: Callable[[str], None] = print,
                     device: str = "auto", compact_at: float = COMPACT_AT, progress: bool = True,
                     before_commit: Callable[[], None] | None = None, *, source: str | None = None,
                     of_source: Sequence[str] = ()) -> RemoveReport:
    """Remove documents and publish the build without them, in one transaction (``hiera remove``).

    ``source`` and ``of_source`` (``hiera remove --source``): of these documents, what that source contributed;
    a merged document keeps its other sources' parts (:meth:`CorpusStore.remove`).

    Holds the writer lock throughout; a refusal (unknown id, every document)
    or a failure of the build leaves the collection exactly as it was.
    ``before_commit`` runs last inside the transaction, once the new build is
    published: a server that removes documents holds its searches there, so
    that none reads the old build's rows after they are gone from the store.
    """
    root = Path(root)
    store = CorpusStore(root)
    if live_build_dir(root) is None:
        raise BadInputError(f"{root} has no index yet; remove documents after `hiera build {root}`")

    def publish() -> None:
        update_collection(root, store, log=log, device=device, compact_at=compact_at, progress=progress)
        if before_commit is not None:
            before_commit()

    with writer_lock(root, "hiera remove"):
        report = store.remove(doc_ids, before_commit=publish, source=source, of_source=of_source)
        remove_unused_builds(root)
    return report
