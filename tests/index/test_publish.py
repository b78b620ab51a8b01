"""Publishing a build: written in a partial directory, swapped in atomically, leftovers and old builds removed.

An interrupted or failed build leaves the live index exactly as it was (and still open in a running process).
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import helpers
import pytest

import hiera.index.build as build_mod
import hiera.index.publish as publish_mod
from hiera.builds import open_collection
from hiera.collection import Collection
from hiera.errors import BadInputError, HieraError
from hiera.index.build import BuildOptions, build
from hiera.index.publish import BUILDS, INDEX_LINK, PENDING, live_build_dir
from hiera.retrieve import get_retriever

QUERIES = list(helpers.TOPIC_QUERIES.items())[:3]


def _results(col: Collection, names=("bm25", "dense", "dhr", "bm25-dhr")) -> dict:
    """Passage ids and scores of a few searches (one batch per retriever: few encoder calls)."""
    out = {}
    qs = [q for _, q in QUERIES[:3]]
    for name in names:
        for q, res in zip(qs, get_retriever(name, col).batch_search(qs, k=5), strict=True):
            out[(name, q)] = [(h.passage_id, round(h.score, 5)) for h in res]
    return out


def _builds(root: Path) -> list[str]:
    return sorted(p.name for p in (root / BUILDS).iterdir() if p.is_dir())  # the builds, not their readers files


# -- atomic swap -----------------------------------------------------------
def test_interrupted_build_leaves_the_old_index_working(col_copy: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    old_dir = live_build_dir(col_copy)
    old_builds = _builds(col_copy)
    old = open_collection(col_copy)
    expected = _results(old)

    calls = []
    real_save = build_mod.save_faiss

    def save_then_interrupt(index, path):
        calls.append(path.name)
        if len(calls) == 2:
            raise KeyboardInterrupt
        real_save(index, path)

    monkeypatch.setattr(build_mod, "save_faiss", save_then_interrupt)
    with pytest.raises(KeyboardInterrupt):
        build(col_copy, BuildOptions(progress=False), log=helpers.QUIET)
    assert calls == ["passages.faiss", "docs.faiss"]

    assert live_build_dir(col_copy) == old_dir
    assert _builds(col_copy) == old_builds
    assert not list((col_copy / BUILDS).glob("*.partial"))
    assert _results(old) == expected  # the open collection is untouched
    assert _results(open_collection(col_copy)) == expected  # and it still opens


def test_a_rebuild_swaps_and_cleans_up(col_copy: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    old_dir = live_build_dir(col_copy)
    with open_collection(col_copy) as old:  # let go at the block's end: the rebuild may then remove its build
        expected = _results(old, names=("bm25", "dense", "dhr"))
    leftover = col_copy / BUILDS / "19990101-000000-1.partial"  # what a killed build leaves behind
    leftover.mkdir()
    (leftover / "junk").write_text("x", encoding="utf-8")

    # The rebuild runs in the same second, in the same process, as the live build, and draws the same random
    # part: its directory name must not collide with the live one.
    stamp, pid, token = old_dir.name.rsplit("-", 2)
    assert pid == str(os.getpid())
    monkeypatch.setattr(build_mod.time, "strftime", lambda *a: stamp)
    monkeypatch.setattr(publish_mod.secrets, "token_hex", lambda n: token)
    build(col_copy, BuildOptions(progress=False, backend=helpers.SHARED_BACKEND), log=helpers.QUIET)
    new_dir = live_build_dir(col_copy)
    assert new_dir != old_dir and not old_dir.exists()
    assert _builds(col_copy) == [new_dir.name]
    build(col_copy, BuildOptions(progress=False, backend=helpers.SHARED_BACKEND), log=helpers.QUIET)  # once more
    assert _builds(col_copy) == [live_build_dir(col_copy).name]
    monkeypatch.undo()
    assert _results(open_collection(col_copy), names=("bm25", "dense", "dhr")) == expected


def test_a_build_a_process_has_open_outlives_newer_ones(col_copy: Path) -> None:
    """A collection opened before a write keeps its build: the writer publishes the new one and leaves the old
    directory while it is held, so the index files the open collection loads later (lazily, at its first search of
    a method) are still there. Once it is let go, the next write removes it; ``hiera check`` says why it stays."""
    from hiera.check import check_collection

    old_dir = live_build_dir(col_copy)
    held = open_collection(col_copy)  # nothing loaded yet: BM25 and FAISS are read at the first search
    build(col_copy, BuildOptions(progress=False, backend=helpers.SHARED_BACKEND), log=helpers.QUIET)
    new_dir = live_build_dir(col_copy)
    assert new_dir != old_dir and old_dir.is_dir() and _builds(col_copy) == sorted([old_dir.name, new_dir.name])
    findings = {f.line() for f in check_collection(col_copy)}
    assert any("kept while a process still has them open" in line and old_dir.name in line for line in findings)
    assert all(res for res in _results(held).values())  # loads the old build's indexes now, and finds
    held.close()
    build(col_copy, BuildOptions(progress=False, backend=helpers.SHARED_BACKEND), log=helpers.QUIET)
    assert _builds(col_copy) == [live_build_dir(col_copy).name] and not old_dir.exists()
    assert not [p.name for p in (col_copy / BUILDS).glob("*.readers") if not p.with_suffix("").is_dir()]


def test_a_dead_readers_build_is_removed(col_copy: Path) -> None:
    """The hold is a lock the operating system drops with its process: a reader killed with SIGKILL keeps nothing."""
    import signal
    import subprocess
    import sys

    old_dir = live_build_dir(col_copy)
    code = ("import sys, time; from hiera.builds import open_collection; c = open_collection(sys.argv[1]); "
            "print('open', flush=True); time.sleep(120)")
    reader = subprocess.Popen([sys.executable, "-c", code, str(col_copy)], stdout=subprocess.PIPE, text=True)
    try:
        assert reader.stdout is not None and reader.stdout.readline().strip() == "open"
        build(col_copy, BuildOptions(progress=False, backend=helpers.SHARED_BACKEND), log=helpers.QUIET)
        assert old_dir.is_dir()  # held by the other process
    finally:
        reader.send_signal(signal.SIGKILL)
        reader.wait(timeout=30)
    build(col_copy, BuildOptions(progress=False, backend=helpers.SHARED_BACKEND), log=helpers.QUIET)
    assert not old_dir.exists() and _builds(col_copy) == [live_build_dir(col_copy).name]


def test_failed_build_keeps_the_old_index(col_copy: Path) -> None:
    old_dir = live_build_dir(col_copy)
    with pytest.raises(BadInputError, match="FAISS"):
        build(col_copy, BuildOptions(progress=False, passage_factory="NoSuchIndex42"), log=helpers.QUIET)
    assert live_build_dir(col_copy) == old_dir
    assert _builds(col_copy) == [old_dir.name]
    open_collection(col_copy).warmup()


# -- an add's swap whose commit is unknown: never guessed --------------------------------------------------
class _Killed(BaseException):
    """Stands for a SIGKILL between an add's swap and its commit (the transaction rolls back as a kill's does)."""


def _killed_add(root: Path, tmp_path: Path) -> tuple[Path, Path]:
    """An add killed after its swap, before its commit: (the build before it, the add's uncommitted build)."""
    from hiera.builds import build_collection
    from hiera.corpus.ingest import ingest
    from hiera.index.manifest import Manifest

    before = live_build_dir(root)
    opts = BuildOptions.from_manifest(Manifest.read(before))
    opts.progress = False

    def build_then_die(store) -> None:
        build_collection(root, opts, log=helpers.QUIET, store=store)
        raise _Killed

    with pytest.raises(_Killed):
        ingest([helpers.write_jsonl(tmp_path / "extra.jsonl", helpers.make_extra_docs())], "hiera-jsonl", root,
               progress=False, before_commit=build_then_die)
    uncommitted = (root / INDEX_LINK).resolve()
    assert uncommitted != before and live_build_dir(root) == before and (root / BUILDS / PENDING).exists()
    return before, uncommitted


def _one_line_error(root: Path, match: str) -> str:
    with pytest.raises(HieraError, match=match) as e:
        live_build_dir(root)
    assert "\n" not in str(e.value)
    with pytest.raises(HieraError, match=match):
        open_collection(root)
    return str(e.value)


def test_a_store_that_cannot_say_what_it_committed_is_an_error(bm25_copy: Path, tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """Unreadable (damaged) or locked: readers are refused, not served the add's possibly uncommitted build."""
    from hiera.check import check_collection
    from hiera.corpus.store import STORE_FILE, CorpusStore

    root = bm25_copy
    before, _ = _killed_add(root, tmp_path)
    store_file = root / STORE_FILE
    good = store_file.read_bytes()
    store_file.write_bytes(b"this is no sqlite database" * 200)
    msg = _one_line_error(root, "cannot tell whether `hiera add`'s build .* was committed")
    assert "corpus store cannot be read" in msg
    store_file.write_bytes(good)
    assert live_build_dir(root) == before  # readable again: the state before the add

    def locked(self) -> str:
        raise sqlite3.OperationalError("database is locked")

    monkeypatch.setattr(CorpusStore, "published_build", property(locked))
    assert "database is locked" in _one_line_error(root, "cannot tell whether")
    errors = [f.line() for f in check_collection(root) if f.status == "error"]
    assert len(errors) == 1 and "database is locked" in errors[0]
    monkeypatch.undo()
    assert live_build_dir(root) == before


def test_a_damaged_pending_marker_is_reported_and_the_next_build_settles_it(
    bm25_copy: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from hiera.cli import main

    root = bm25_copy
    _, uncommitted = _killed_add(root, tmp_path)
    marker = root / BUILDS / PENDING
    for damage in ("{\"previous\": ", "[1, 2]", "{\"previous\": \"x\"}"):
        marker.write_text(damage)
        msg = _one_line_error(root, "damaged pending-swap marker")
        assert "cannot tell whether the last `hiera add` committed" in msg and f"hiera build {root}" in msg
    assert main(["check", str(root)]) == 1
    assert "damaged pending-swap marker" in capsys.readouterr().out
    # the next build is made from the committed documents alone, and clears the marker
    assert main(["build", str(root), "-q"]) == 0
    assert not marker.exists() and live_build_dir(root) not in (None, uncommitted)
    col = open_collection(root)
    assert col.manifest.corpus_version == col.store.version
    assert col.store.get_document("honeybees") is None  # the killed add's documents never committed ...
    assert not any(h.doc_id == "honeybees" for h in get_retriever("bm25", col).search("honeybee hive waggle dance", k=5))


def test_a_server_keeps_its_open_build_while_the_live_one_cannot_be_told(
    bm25_copy: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A reload check that meets a damaged marker keeps answering from the build it has open, and says why."""
    from hiera.serve.service import Service

    root = bm25_copy
    before, _ = _killed_add(root, tmp_path)
    service = Service(root)
    assert service.col.build_dir == before
    (root / BUILDS / PENDING).write_text("{")
    with caplog.at_level("WARNING", logger="hiera.serve"):
        service.refresh(every=0)
    assert service.col.build_dir == before and service.stale is None
    assert f"still serving build {before.name}" in caplog.text and "damaged pending-swap marker" in caplog.text
    assert service.retriever("bm25").search("chess knight", k=1).hits


def test_a_removed_builds_name_is_never_reused(col_copy: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Builds published in the same second by one process get new names, even once the earlier ones are removed.

    A server still serving a removed build tells a newer one by its name: a
    reused name would look like the build it already serves.
    """
    stamp = live_build_dir(col_copy).name.split("-")[0] + "-000000"
    monkeypatch.setattr(build_mod.time, "strftime", lambda *a: stamp)
    names = [live_build_dir(col_copy).name]
    for _ in range(3):
        build(col_copy, BuildOptions(progress=False, backend=helpers.SHARED_BACKEND), log=helpers.QUIET)
        names.append(live_build_dir(col_copy).name)
    assert len(set(names)) == len(names)
    assert _builds(col_copy) == [names[-1]]
