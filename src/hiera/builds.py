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

from collections.abc import Callable
from pathlib import Path
from typing import Any

from hiera.collection import Collection, LocalCollection
from hiera.corpus.store import CorpusStore
from hiera.errors import ManifestMismatchError
from hiera.index.build import BuildOptions, build
from hiera.index.manifest import Manifest, is_sharded
from hiera.index.publish import live_build_dir
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
