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

``hiera add`` swaps its build in *inside* the ingest's open transaction, so
that documents and index land together; the swap and the SQLite commit are
still two steps. Before that swap the publisher writes ``builds/pending.json``
naming the previous build and the new one, and records the new build's name in
the store inside the open transaction. While the marker exists and the store's
committed record names another build (the commit never came: a kill, a failed
commit; and whatever other writer committed since), :func:`live_build_dir`
answers the previous build, so every reader sees the state before the command;
the next writer that publishes settles it (:func:`settle_pending`): the link
back when the commit never came, the marker removed either way.

Which build is live is never guessed. A marker that cannot be read, or a store
that cannot say which build it committed (locked past SQLite's wait, damaged),
is a :class:`HieraError` for readers: serving the linked build then might
serve documents whose transaction never committed. The next writer settles a
damaged marker by building from the committed store without reusing the
linked build (its vectors are matched by store row, which an uncommitted add
may have handed out twice).
"""

from __future__ import annotations

import errno
import json
import os
import secrets
import shutil
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path

from hiera.corpus.store import CorpusStore
from hiera.errors import HieraError
from hiera.index.manifest import TUNED_SUFFIX, Manifest
from hiera.io import fsync_dir
from hiera.lock import READERS_SUFFIX, unread_build, writer_lock

INDEX_LINK = "index"
BUILDS = "builds"
REMOVED = ".removed"  # a build being removed: renamed, then deleted
PENDING = "pending.json"  # in builds/: {"previous": name, "build": name} while an add's swap awaits its commit

# (partial directory, the store to read, the live build's directory and manifest, if any) → the new manifest
Writer = Callable[[Path, CorpusStore, Path | None, Manifest | None], Manifest]


def live_build_dir(root: Path) -> Path | None:
    """The build the ``index`` link points to, or ``None`` before the first build."""
    root = Path(root)
    link = root / INDEX_LINK
    if not link.exists():
        return None
    live = link.resolve()
    previous = _uncommitted_previous(root, live)
    return previous if previous is not None else live


class PendingMarkerError(HieraError):
    """``builds/pending.json`` exists but is not a marker this module wrote: whether the last add committed is unknown."""


def pending_swap(root: Path) -> dict[str, str] | None:
    """The marker of an ``add`` whose swap may not have been committed, if one is there.

    Raises :class:`PendingMarkerError` when the file is there but unreadable or
    not a marker (it is written whole and renamed into place, so only outside
    damage does that).
    """
    path = Path(root) / BUILDS / PENDING
    try:
        text = path.read_text()
    except FileNotFoundError:
        return None
    except OSError as e:
        raise PendingMarkerError(_marker_message(path, e.strerror or type(e).__name__)) from None
    try:
        data = json.loads(text)
    except ValueError as e:
        raise PendingMarkerError(_marker_message(path, f"not JSON: {e}")) from None
    if not isinstance(data, dict) or not all(isinstance(data.get(k), str) for k in ("previous", "build")):
        raise PendingMarkerError(_marker_message(path, "no previous and build names"))
    return data


def _marker_message(path: Path, why: str) -> str:
    return (f"{path}: damaged pending-swap marker ({why}); cannot tell whether the last `hiera add` committed — "
            f"`hiera build {path.parents[1]}` rebuilds from the committed documents and clears it")


def _uncommitted_previous(root: Path, live: Path) -> Path | None:
    """The previous build, when the link points to an add's build whose transaction never committed.

    A store that cannot be read is an error, not a guess (see the module's docstring).
    """
    pending = pending_swap(root)
    if pending is None or live.name != pending["build"]:
        return None
    previous = root / BUILDS / pending["previous"]
    if not previous.is_dir():
        return None
    try:
        store = CorpusStore(root)
        try:
            committed = store.published_build
        finally:
            store.close()
    except (HieraError, sqlite3.Error) as e:
        reason = " ".join(str(e).split())[:200] or type(e).__name__
        raise HieraError(
            f"{root}: cannot tell whether `hiera add`'s build {pending['build']} was committed: the corpus store "
            f"cannot be read ({reason}); retry once the store is readable"
        ) from None
    return previous if committed != pending["build"] else None


def settle_pending(root: Path) -> bool:
    """Under the writer lock: put the link back if an add's commit never came, then drop the marker.

    Returns True when the marker is damaged: it is left in place (readers keep
    refusing) and the caller must build without the linked build and remove
    it once its own build is live.
    """
    root = Path(root)
    marker = root / BUILDS / PENDING
    if not marker.exists():
        return False
    link = root / INDEX_LINK
    if link.exists():
        try:
            previous = _uncommitted_previous(root, link.resolve())
        except PendingMarkerError:
            return True
        if previous is not None:
            _swap_link(root, previous)
            fsync_dir(root)
    marker.unlink(missing_ok=True)
    fsync_dir(root / BUILDS)
    return False


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
        manifest = _publish_locked(root, write, store or CorpusStore(root), in_transaction=store is not None)
        if store is None:
            remove_unused_builds(root)
        return manifest


def remove_unused_builds(root: Path) -> None:
    """Every build but the live one that no process has open, leftovers of killed builds, and the tuning and
    readers files of removed builds.

    Called under the writer lock, so no other build is being written. A build some reader still holds
    (:func:`hiera.lock.hold_build`) is kept; a later writer removes it once it is let go.
    """
    settle_pending(Path(root))
    builds = Path(root) / BUILDS
    live = live_build_dir(Path(root))
    if not builds.is_dir():
        return
    for p in builds.iterdir():
        if not p.is_dir() or (live is not None and p.resolve() == live):
            continue
        if p.name.endswith((".partial", REMOVED)):  # a killed build's or a killed removal's leftovers
            shutil.rmtree(p, ignore_errors=True)
            continue
        with unread_build(p) as unread:  # a build a process still has open stays until it is let go
            if unread:
                gone = p.with_name(p.name + REMOVED)  # renamed first: a reader waiting on the lock sees it gone
                shutil.rmtree(gone, ignore_errors=True)
                os.replace(p, gone)
                shutil.rmtree(gone, ignore_errors=True)
    for p in builds.glob(f"*{TUNED_SUFFIX}"):
        if not (builds / p.name[: -len(TUNED_SUFFIX)]).is_dir():
            p.unlink(missing_ok=True)
    for p in builds.glob(f"*{READERS_SUFFIX}"):  # left by a reader that lost the race to a removal
        build = builds / p.name[: -len(READERS_SUFFIX)]
        if not build.is_dir():
            with unread_build(build):
                pass


def _publish_locked(root: Path, write: Writer, store: CorpusStore, in_transaction: bool) -> Manifest:
    damaged = settle_pending(root)
    # with a damaged marker the linked build may hold an uncommitted add: kept as the fallback, never reused
    previous_dir = (root / INDEX_LINK).resolve() if damaged else live_build_dir(root)
    previous = None if damaged else _read_previous(previous_dir)
    builds = root / BUILDS
    builds.mkdir(exist_ok=True)
    # A build's name is never reused, not even once its directory is removed: a server or a Ray router that
    # still serves a removed build tells a newer one by its name. Two builds in the same second by one process
    # (a server, a script, `add` right after `build`) differ in their random part.
    stamp = time.strftime("%Y%m%d-%H%M%S") + f"-{os.getpid()}-{secrets.token_hex(3)}"
    name, n = stamp, 1
    while (builds / name).exists() or (builds / (name + ".partial")).exists():
        n += 1
        name = f"{stamp}-{n}"
    partial = builds / (name + ".partial")
    partial.mkdir()
    try:
        manifest = write(partial, store, None if damaged else previous_dir, previous)
        final = builds / name
        os.replace(partial, final)
        fsync_dir(builds)
        if in_transaction:
            store.mark_published(final.name)  # commits with the documents, or rolls back with them
            if previous_dir is not None:
                _write_pending(builds, previous_dir.name, final.name)  # replaces a damaged marker too
        _swap_link(root, final)
        fsync_dir(root)
        if damaged and not in_transaction:
            (builds / PENDING).unlink(missing_ok=True)  # the live build is now made from committed documents only
            fsync_dir(builds)
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


def _write_pending(builds: Path, previous: str, build: str) -> None:
    tmp = builds / f".{PENDING}.{os.getpid()}.tmp"
    with open(tmp, "w") as f:
        json.dump({"previous": previous, "build": build}, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, builds / PENDING)
    fsync_dir(builds)


def _swap_link(root: Path, target: Path) -> None:
    tmp = root / f".{INDEX_LINK}.{os.getpid()}.tmp"
    if tmp.is_symlink() or tmp.exists():
        tmp.unlink()
    os.symlink(os.path.relpath(target, root), tmp)
    os.replace(tmp, root / INDEX_LINK)
