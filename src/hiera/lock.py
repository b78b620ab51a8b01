"""One writer per collection: an exclusive ``flock`` on ``DIR/writer.lock``.

Every command that changes a collection (``hiera ingest``, ``add``, ``build``,
``tune`` when it saves) holds the lock for its whole run; a second writer is
refused at once with ``collection is busy (locked by PID N since T)`` instead
of waiting or interleaving its writes. Readers (search, the server, ``hiera
check``) never take it: they see the old build or the new one through the
atomic symlink swap.

The operating system releases a ``flock`` when its holder dies, however it
dies (SIGKILL included), so a lock left by a dead process is never an
obstacle: the next writer acquires it, notices the dead PID recorded inside
and reports that it cleared a stale lock. The file itself is kept (unlinking a
lock file races with a process that has just opened it).

The lock is re-entrant within one process: ``hiera add`` holds it across its
ingest and its build, which take it again.
"""

from __future__ import annotations

import fcntl
import json
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from hiera.errors import HieraError
from hiera.io import loads_json

LOCK_FILE = "writer.lock"


class CollectionBusyError(HieraError):
    """Another process is writing the collection."""


@dataclass(frozen=True)
class LockInfo:
    """What a holder records in the lock file (for the busy message)."""

    pid: int
    since: str
    command: str

    def describe(self) -> str:
        return f"locked by PID {self.pid} since {self.since}" + (f", running {self.command}" if self.command else "")


# resolved root -> (fd, depth, thread) for re-entry by the thread that holds it; another thread of this process is
# another writer, refused as another process would be (flock alone cannot tell them apart: the fd is shared)
_held: dict[str, tuple[int, int, int]] = {}
_guard = threading.Lock()


def read_lock_info(root: Path) -> LockInfo | None:
    """The holder (or last holder) recorded in ``root``'s lock file, if readable."""
    try:
        data = loads_json((Path(root) / LOCK_FILE).read_text(encoding="utf-8"))
        return LockInfo(int(data["pid"]), str(data.get("since", "?")), str(data.get("command", "")))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def pid_alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, owned by someone else
        return True
    return True


def is_locked(root: Path) -> LockInfo | None:
    """The holder if another process holds the lock now, else ``None`` (does not keep the lock)."""
    path = Path(root) / LOCK_FILE
    if not path.exists():
        return None
    key = str(Path(root).resolve())
    with _guard:
        if key in _held:
            return read_lock_info(root)
    try:
        fd = os.open(path, os.O_RDONLY)  # flock needs no write access: works on a read-only collection too
    except OSError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return read_lock_info(root) or LockInfo(-1, "?", "")
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)


@contextmanager
def writer_lock(
    root: str | Path, command: str = "", on_stale: Callable[[str], None] | None = None, *, create: bool = False
) -> Iterator[None]:
    """Hold the collection's writer lock for the block; refuse at once if another process holds it.

    ``root`` must exist unless ``create`` (a first ingest creates it). ``on_stale``
    receives a one-line note (default: printed to stderr) when the
    previous holder died without releasing: the OS already dropped its lock,
    so acquiring it is the clearing.
    """
    root = Path(root)
    if create:
        from hiera.errors import BadInputError

        try:
            root.mkdir(parents=True, exist_ok=True)
        except (FileExistsError, NotADirectoryError):
            raise BadInputError(f"{root} is a file, not a collection directory; choose another --index") from None
        except PermissionError as e:
            raise BadInputError(f"cannot create the collection directory {root}: {e.strerror}") from None
    elif not root.is_dir():
        from hiera.errors import IndexMissingError

        raise IndexMissingError(f"{root} is not a hiera collection (no such directory)")
    key = str(root.resolve())
    with _guard:
        if key in _held:
            fd, depth, owner = _held[key]
            if owner != threading.get_ident():
                info = read_lock_info(root)
                holder = info.describe() if info is not None else "locked"
                raise CollectionBusyError(f"{root}: collection is busy ({holder}, in another thread of this "
                                          "process); wait for it to finish")
            _held[key] = (fd, depth + 1, owner)
            reentered = True
        else:
            reentered = False
    if reentered:
        try:
            yield
        finally:
            _release(key)
        return

    path = root / LOCK_FILE
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as e:  # a read-only collection (or disk): nothing can be written, so nothing is tried
        raise HieraError(f"{root}: cannot write to the collection ({e.strerror}: {path}); nothing was changed") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        info = read_lock_info(root)
        holder = info.describe() if info is not None else "locked by another process"
        raise CollectionBusyError(
            f"{root}: collection is busy ({holder}); wait for it to finish, or stop it"
        ) from None
    except OSError as e:
        os.close(fd)
        raise HieraError(f"{root}: cannot lock the collection ({e.strerror})") from None
    # A clean release empties the file; a record still there means its holder died holding the lock.
    previous = read_lock_info(root)
    if previous is not None:
        note = f"cleared a stale lock of {root} left by PID {previous.pid} (since {previous.since}), which died"
        (on_stale or _note)(note)
    record = {"pid": os.getpid(), "since": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "command": command}
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, (json.dumps(record) + "\n").encode(), 0)
    except OSError:
        pass  # the message loses its PID, the lock still holds
    with _guard:
        _held[key] = (fd, 1, threading.get_ident())
    try:
        yield
    finally:
        _release(key)


def _note(msg: str) -> None:
    print(f"hiera: note: {msg}", file=sys.stderr, flush=True)


def _release(key: str) -> None:
    with _guard:
        fd, depth, owner = _held[key]
        if depth > 1:
            _held[key] = (fd, depth - 1, owner)
            return
        del _held[key]
    try:
        try:
            os.ftruncate(fd, 0)  # released cleanly: nothing stale to report next time
        except OSError:
            pass
        fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


# -- readers of a build --------------------------------------------------------------------------------------
# Every process that has a build open holds a shared flock on ``builds/<name>.readers``; a writer removes a build
# nobody serves any more only when it can take that lock exclusively. A reader loads index files lazily (the first
# search of a method), so a build removed under it would fail that search; a lock held by a dead process is
# released with it, so nothing is kept for a reader that is gone.
READERS_SUFFIX = ".readers"


def readers_file(build_dir: Path) -> Path:
    return build_dir.with_name(build_dir.name + READERS_SUFFIX)


def hold_build(build_dir: Path) -> tuple[bool, int | None]:
    """Take a shared lock on ``build_dir`` for as long as the returned descriptor stays open.

    ``(False, None)``: the build was removed before the lock was taken (resolve the live build again).
    ``(True, None)``: the lock file cannot be made (a read-only collection, where nothing removes builds).
    """
    path = readers_file(build_dir)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CREAT, 0o644)
    except OSError:
        return build_dir.is_dir(), None
    fcntl.flock(fd, fcntl.LOCK_SH)
    # a writer renames a build away before it unlinks the lock file, both under its exclusive lock
    if os.fstat(fd).st_nlink == 0 or not build_dir.is_dir():
        os.close(fd)
        return False, None
    return True, fd


@contextmanager
def unread_build(build_dir: Path) -> Iterator[bool]:
    """Whether no process has ``build_dir`` open; while True, none can open it until the block ends (the caller
    removes it then: new readers wait, then see it gone). The lock file goes with the block when the build went."""
    path = readers_file(build_dir)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        yield True
        if not build_dir.exists():
            path.unlink(missing_ok=True)
    finally:
        os.close(fd)


def build_is_open(build_dir: Path) -> bool:
    """Whether some process holds ``build_dir`` open now (a probe that creates nothing: ``hiera check``)."""
    try:
        fd = os.open(readers_file(build_dir), os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False
