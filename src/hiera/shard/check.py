"""``hiera check`` of a sharded build: every shard checked like a build, each finding naming its shard.

A shard is a build directory of its own (manifest, files with sizes and
checksums, BM25, dense), so the checks are :mod:`hiera.check`'s, run per
shard into a scratch list whose findings are then reported under ``shards``
with the shard's name. On top: the shard is the one the build recorded
(sha256 of its manifest), at the build's corpus version, and the shards tile
the documents and passages in order.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hiera.errors import HieraError
from hiera.index.manifest import Manifest
from hiera.shard.layout import SHARDS_DIR
from hiera.shard.shard import open_shard_manifest


def check_shards(build_dir: Path, m: Manifest, c: Any, checksums: bool) -> None:
    from hiera.check import _check_bm25, _check_dense, _check_files, _Checks

    errors = 0
    docs = passages = 0
    for e in m.shards:
        name = e.get("name", "?")
        if e.get("docs", [None])[0] != docs or e.get("passages", [None])[0] != passages:
            c.error("shards", f"shard {name} does not start where the previous one ends (documents {docs}, "
                    f"passages {passages}); rebuild with `hiera build`")
            errors += 1
        docs, passages = int(e["docs"][1]), int(e["passages"][1])
        try:
            sm = open_shard_manifest(build_dir, e, m.corpus_version)
        except HieraError as err:
            c.error("shards", str(err))
            errors += 1
            continue
        sub = _Checks()
        shard_dir = build_dir / SHARDS_DIR / name
        if _check_files(shard_dir, sm, sub, checksums):
            for fn in (_check_bm25, _check_dense):
                try:
                    fn(shard_dir, sm, sub)
                except Exception as err:  # a corrupt file can make numpy, bm25s or FAISS raise anything
                    sub.error(fn.__name__.removeprefix("_check_"), f"cannot read: {type(err).__name__}")
        for f in sub.findings:
            if f.status != "ok":
                c.add("shards", f.status, f"shard {name}: {f.check}: {f.detail}")
                errors += f.status == "error"
    if (docs, passages) != (m.documents, m.passages):
        c.error("shards", f"the shards cover {docs} documents and {passages} passages, the build {m.documents} "
                f"and {m.passages}")
        errors += 1
    if not errors:
        what = "checksums" if checksums else "sizes"
        c.ok("shards", f"{len(m.shards)} shards: manifests as recorded, files match their {what}, BM25 and dense sizes")
