"""Atomic file writes: a reader sees the old file or the new one, never half of one; and ``.npy`` loads that
threads may run side by side.

Manifests, training reports and example caches are read back by later runs
(resumes, ``hiera build``'s checks), so an interrupted write must not leave a
truncated file where a good one was.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

# numpy parses every .npy header with ``ast.literal_eval``, and CPython before 3.11.8 (gh-106905) keeps one AST
# recursion counter per interpreter: two threads parsing at once (three shards loading side by side, two first
# requests of a server) can fail with "SystemError: AST constructor recursion depth mismatch". Every .npy hiera
# reads goes through :func:`load_npy`, one at a time; a memory-mapped load holds it only for the header.
NPY_LOCK = threading.RLock()


def load_npy(path: str | Path, mmap: bool = False) -> Any:
    """``np.load(path)`` (memory-mapped read-only with ``mmap``), never beside another thread's (:data:`NPY_LOCK`)."""
    import numpy as np

    with NPY_LOCK:
        return np.load(path, mmap_mode="r" if mmap else None, allow_pickle=False)


def write_atomic(target: Path, write: Callable[[Path], None]) -> Path:
    """``write(tmp)`` to a temporary name beside ``target``, then rename it over ``target``.

    The name is unique to the process and the moment, so two writers of one
    target never write into the same temporary file (the last rename wins, whole);
    a failed ``write`` leaves no temporary file behind.
    """
    tmp = target.with_name(f".{target.name}.{os.getpid()}.{time.monotonic_ns()}.tmp")
    try:
        write(tmp)
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
    return target


def write_json_atomic(path: Path, data: Any) -> None:
    """Write ``data`` as JSON beside ``path``, fsync it, then rename it over ``path``."""

    def dump(tmp: Path) -> None:
        with open(tmp, "w", encoding="utf-8") as fh:
            json.dump(data, fh, indent=2, ensure_ascii=False, sort_keys=True)
            fh.flush()
            os.fsync(fh.fileno())

    write_atomic(Path(path), dump)


def fsync_dir(path: Path) -> None:
    """Make a rename or a new entry in ``path`` durable (best effort where directories cannot be opened)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def loads_json(text: str | bytes) -> Any:
    """``json.loads`` whose every failure is a :class:`json.JSONDecodeError` (a ``ValueError``).

    The standard decoder raises ``RecursionError`` on deeply nested input
    (``[[[[…``), which hostile or damaged files contain; callers that handle
    malformed JSON then handle that too.
    """
    try:
        return json.loads(text)
    except RecursionError:
        doc = text if isinstance(text, str) else text.decode("utf-8", "replace")
        raise json.JSONDecodeError("nested too deeply", doc, 0) from None
