"""One writer per collection: a second writer is refused at once; a dead holder's lock is cleared."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import helpers
import pytest

from hiera.cli import main
from hiera.corpus.store import CorpusStore
from hiera.errors import HieraError
from hiera.lock import LOCK_FILE, CollectionBusyError, is_locked, read_lock_info, writer_lock

HOLD = textwrap.dedent(
    """
    import sys, time
    from hiera.lock import writer_lock
    with writer_lock(sys.argv[1], "test holder"):
        print("locked", flush=True)
        time.sleep(120)
    """
)


@pytest.fixture
def store_only(tmp_path: Path) -> Path:
    """A collection with documents and no index (building it takes well under a second with --no-dense)."""
    root = tmp_path / "col"
    CorpusStore(root, create=True).ingest(helpers.make_docs())
    return root


@pytest.fixture
def holder(store_only: Path) -> Iterator[subprocess.Popen]:
    """Another process holding the collection's writer lock."""
    proc = subprocess.Popen([sys.executable, "-c", HOLD, str(store_only)], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "locked"
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    rc = main(list(argv))
    return rc, capsys.readouterr().err


def test_second_writer_is_refused_at_once_with_the_holder(store_only: Path, holder: subprocess.Popen, capsys, tmp_path: Path) -> None:
    src = helpers.write_jsonl(tmp_path / "extra.jsonl", helpers.make_extra_docs())
    before = helpers.export_digest(store_only)
    for argv in (
        ("build", str(store_only), "--no-dense", "-q"),
        ("ingest", str(src), "--format", "hiera-jsonl", "--index", str(store_only), "-q"),
    ):
        t = time.perf_counter()
        rc, err = _run(capsys, *argv)
        assert time.perf_counter() - t < 5, "the second writer must not wait"
        assert rc == 2
        lines = err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("hiera: error: ")
        assert f"collection is busy (locked by PID {holder.pid} since " in lines[0]
        assert "running test holder" in lines[0]
    assert helpers.export_digest(store_only) == before
    assert not (store_only / "index").exists()
    assert is_locked(store_only) == read_lock_info(store_only)
    assert read_lock_info(store_only).pid == holder.pid


def test_killed_holder_lock_is_detected_and_cleared(store_only: Path, holder: subprocess.Popen, capsys) -> None:
    os.kill(holder.pid, signal.SIGKILL)
    holder.wait()
    assert read_lock_info(store_only).pid == holder.pid  # its record is still in the file
    assert is_locked(store_only) is None  # but the OS dropped its lock
    rc, err = _run(capsys, "build", str(store_only), "--no-dense", "-q")
    assert rc == 0, err
    assert f"cleared a stale lock of {store_only} left by PID {holder.pid}" in err
    assert (store_only / "index" / "manifest.json").exists()
    assert read_lock_info(store_only) is None  # a clean release leaves nothing stale behind


def test_add_holds_the_lock_across_ingest_and_build(store_only: Path, tmp_path: Path, capsys) -> None:
    """The lock is re-entrant in one process: ``add`` takes it, then ingest and build take it again."""
    assert _run(capsys, "build", str(store_only), "--no-dense", "-q")[0] == 0
    src = helpers.write_jsonl(tmp_path / "extra.jsonl", helpers.make_extra_docs())
    rc, err = _run(capsys, "add", str(store_only), str(src), "--format", "hiera-jsonl", "-q")
    assert rc == 0, err
    assert CorpusStore(store_only).stats()["documents"] == 8
    assert is_locked(store_only) is None and (store_only / LOCK_FILE).read_text() == ""


def test_library_writers_are_refused_too(store_only: Path, holder: subprocess.Popen) -> None:
    from hiera.eval.tune import save_tuned
    from hiera.index.build import BuildOptions, build

    with pytest.raises(CollectionBusyError, match="collection is busy"):
        build(store_only, BuildOptions(dense=False, progress=False), log=helpers.QUIET)
    with pytest.raises(CollectionBusyError, match=f"PID {holder.pid}"):
        save_tuned(store_only, {"lam": 1.0}, {})


def test_reentry_and_release_in_one_process(tmp_path: Path) -> None:
    root = tmp_path / "c"
    with pytest.raises(HieraError, match="not a hiera collection"):  # a writer never creates a directory by mistake
        with writer_lock(root):
            pass
    assert not root.exists()
    root.mkdir()
    with writer_lock(root, "outer"):
        with writer_lock(root, "inner"):
            assert read_lock_info(root).command == "outer"
        assert read_lock_info(root).command == "outer"  # still held after the inner block
    assert read_lock_info(root) is None
    with writer_lock(root):  # and free again
        pass


def test_another_thread_of_the_process_is_another_writer(tmp_path: Path) -> None:
    """Re-entry is for the thread that holds the lock: a second thread writing the same collection is refused at
    once, as a second process is, instead of both writing and one failing on SQLite's lock later."""
    import threading

    from hiera.lock import CollectionBusyError

    root = tmp_path / "c"
    root.mkdir()
    seen: list[str] = []

    def second_writer() -> None:
        try:
            with writer_lock(root, "second"):
                seen.append("entered")
        except CollectionBusyError as e:
            seen.append(str(e))

    with writer_lock(root, "first"):
        t = threading.Thread(target=second_writer)
        t.start()
        t.join(10)
    assert len(seen) == 1 and "collection is busy" in seen[0] and "in another thread of this process" in seen[0]
    assert "running first" in seen[0]
    t = threading.Thread(target=second_writer)  # once released, the other thread may write
    t.start()
    t.join(10)
    assert seen[-1] == "entered"


def test_a_lock_file_that_cannot_be_opened_is_one_line(store_only: Path, capsys) -> None:
    """A collection nothing can be written to (read-only, or its lock path taken) refuses writers in one line."""
    (store_only / LOCK_FILE).unlink(missing_ok=True)
    (store_only / LOCK_FILE).mkdir()  # os.open fails as it does on a read-only directory
    try:
        assert main(["build", str(store_only), "--no-dense", "-q"]) != 0
    finally:
        (store_only / LOCK_FILE).rmdir()
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "cannot write to the collection" in err[0] and "nothing was changed" in err[0]


def test_failed_first_ingest_leaves_no_lock_file_in_a_user_directory(tmp_path: Path) -> None:
    from hiera.corpus.ingest import ingest
    from hiera.errors import HieraError

    root = tmp_path / "mine"
    root.mkdir()
    (root / "notes.txt").write_text("keep me")
    bad = tmp_path / "bad.jsonl"
    bad.write_text("{not json}\n")
    with pytest.raises(HieraError):
        ingest([bad], "jsonl", root, progress=False)
    assert sorted(p.name for p in root.iterdir()) == ["notes.txt"]
