"""Sharded builds and search: contiguous document ranges, merged exactly.

``layout`` (names, shard plan), ``bm25stats`` (BM25 with corpus-wide
statistics), ``build`` (``hiera build --shards N``), ``engine`` (in-process or
Ray: Ray Data encoding, Ray tasks per shard), ``shard`` (one shard's indexes
behind a small primitive API), ``merge`` (per-shard top-k → global top-k),
``collection`` (a :class:`~hiera.collection.Collection` whose indexes fan out
over shards), ``check`` (``hiera check`` of shards). Serving a sharded build
with Ray Serve (a router plus one deployment per shard) is
:mod:`hiera.serve.ray`: this package imports nothing from :mod:`hiera.serve`.

Nothing here imports Ray at import time: only the Ray engine does, when it is
used.
"""
