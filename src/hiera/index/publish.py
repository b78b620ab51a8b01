"""Publishing a build: a fresh ``.partial`` directory, written under the writer lock, then swapped in.

Every writer of an index — the local one (:mod:`hiera.index.build`) and the
sharded one (:mod:`hiera.shard.build`) — hands :func:`publish` a function
that fills a directory and returns its manifest; the publisher owns
everything around it, once:

* the collection's writer lock (:mod:`hiera.lock`; ``hiera add`` already
  holds it, the lock is re-entrant within a process);
* a build name no other build of this process or second uses, written as
  ``builds/<name>.partial`` and renamed only when complete;
* the atomic swap of the ``index`` symlink (``os.replace``), with directory
  fsyncs, so a killed build never damages the index in use;
* a failure while writing (disk full, a file size limit, a read-only disk)
  turned into one :class:`HieraError` line, the partial directory removed and
  the live build untouched;
* removing the builds nobody serves any more.
"""

from __future__ import annotations

import errno
import os
import shutil
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path

from hiera.corpus.store import CorpusStore
from hiera.errors import HieraError
from hiera.index.manifest import TUNED_SUFFIX, Manifest
from hiera.io import fsync_dir
from hiera.lock import writer_lock

INDEX_LINK = "index"
BUILDS = "builds"

# (partial directory, the store to read, the live build's directory and manifest, if any) → the new manifest
Writer = Callable[[Path, CorpusStore, Path | None, Manifest | None], Manifest]


def live_build_dir(root: Path) -> Path | None:
    """The build the ``index`` link points to, or ``None`` before the first build."""
    link = Path(root) / INDEX_LINK
    if not link.exists():
        return None
    return link.resolve()


def publish(root: str | Path, write: Writer, *, store: CorpusStore | None = None,
            command: str = "hiera build") -> Manifest:
    """Run ``write`` into a fresh directory of the collection at ``root`` and swap it in.

    Holds the collection's writer lock (a second writer is refused at once).

    ``store``: read the corpus through this store (``hiera add`` passes the
    one whose ingest transaction is still open); the previous build is then
    kept, for the caller to remove with :func:`remove_unused_builds` once it
    has committed.
    """
    root = Path(root)
    CorpusStore(root)  # a missing collection is refused before the lock file is created
    with writer_lock(root, command):
        manifest = _publish_locked(root, write, store or CorpusStore(root))
        if store is None:
            remove_unused_builds(root)
        return manifest


def remove_unused_builds(root: Path) -> None:
    """Every build but the live one, leftovers of killed builds and tuning files of removed builds.

    Called under the writer lock, so no other build is being written.
    """
    builds = Path(root) / BUILDS
    live = live_build_dir(Path(root))
    if not builds.is_dir():
        return
    for p in builds.iterdir():
        if p.is_dir() and (live is None or p.resolve() != live):
            shutil.rmtree(p, ignore_errors=True)
    for p in builds.glob(f"*{TUNED_SUFFIX}"):
        if not (builds / p.name[: -len(TUNED_SUFFIX)]).is_dir():
            p.unlink(missing_ok=True)


def _publish_locked(root: Path, write: Writer, store: CorpusStore) -> Manifest:
    previous_dir = live_build_dir(root)
    previous = _read_previous(previous_dir)
    builds = root / BUILDS
    builds.mkdir(exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S") + f"-{os.getpid()}"
    name, n = stamp, 1
    # Two builds in the same second by one process (a server, a script, `add`
    # right after `build`) must not collide with the live build directory.
    while (builds / name).exists() or (builds / (name + ".partial")).exists():
        n += 1
        name = f"{stamp}-{n}"
    partial = builds / (name + ".partial")
    partial.mkdir()
    try:
        manifest = write(partial, store, previous_dir, previous)
        final = builds / name
        os.replace(partial, final)
        fsync_dir(builds)
        _swap_link(root, final)
        fsync_dir(root)
    except BaseException as e:
        shutil.rmtree(partial, ignore_errors=True)
        if _is_write_failure(e):
            raise HieraError(
                f"cannot write the new index of {root}: {_reason(e)}; the previous index is untouched "
                "(free some space and rerun `hiera build`)"
            ) from None
        raise
    return manifest


_WRITE_ERRNOS = frozenset({errno.ENOSPC, errno.EFBIG, errno.EDQUOT, errno.EROFS, errno.EIO, errno.EACCES, errno.EPERM})


def _is_write_failure(e: BaseException) -> bool:
    """Disk full, a file size limit, a read-only or failing disk — not a bug.

    numpy and bm25s raise ``OSError``; the embedding cache raises SQLite's
    ``OperationalError``; FAISS reports a failed ``fwrite`` as a ``RuntimeError``.
    """
    if isinstance(e, OSError):  # errno None: a short write ("1673 requested and 496 written", numpy's tofile)
        return e.errno in _WRITE_ERRNOS or (e.errno is None and "written" in str(e))
    text = str(e).lower()
    if isinstance(e, sqlite3.OperationalError):
        return any(w in text for w in ("disk", "full", "i/o", "readonly", "read-only"))
    return isinstance(e, RuntimeError) and ("fwrite" in text or ("faiss" in text and "write" in text))


def _reason(e: BaseException) -> str:
    if isinstance(e, OSError):
        return f"{e.strerror or type(e).__name__} ({e.filename})" if e.filename else (e.strerror or str(e))
    text = " ".join(str(e).split())
    return text.splitlines()[0][:200] if text else type(e).__name__


def _read_previous(previous_dir: Path | None) -> Manifest | None:
    if previous_dir is None:
        return None
    try:
        return Manifest.read(previous_dir)
    except HieraError:
        return None


def _swap_link(root: Path, target: Path) -> None:
    tmp = root / f".{INDEX_LINK}.{os.getpid()}.tmp"
    if tmp.is_symlink() or tmp.exists():
        tmp.unlink()
    os.symlink(os.path.relpath(target, root), tmp)
    os.replace(tmp, root / INDEX_LINK)
