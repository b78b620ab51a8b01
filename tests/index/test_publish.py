"""Publishing a build: written in a partial directory, swapped in atomically, leftovers and old builds removed.

An interrupted or failed build leaves the live index exactly as it was (and still open in a running process).
"""

from __future__ import annotations

import os
from pathlib import Path

import helpers
import pytest

import hiera.index.build as build_mod
from hiera.builds import open_collection
from hiera.collection import Collection
from hiera.errors import BadInputError
from hiera.index.build import BuildOptions, build
from hiera.index.publish import BUILDS, live_build_dir
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
    return sorted(p.name for p in (root / BUILDS).iterdir())


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
    expected = _results(open_collection(col_copy), names=("bm25", "dense", "dhr"))
    leftover = col_copy / BUILDS / "19990101-000000-1.partial"  # what a killed build leaves behind
    leftover.mkdir()
    (leftover / "junk").write_text("x", encoding="utf-8")

    # The rebuild runs in the same second, in the same process, as the live build:
    # its directory name must not collide with the live one.
    stamp, pid = old_dir.name.rsplit("-", 1)
    assert pid == str(os.getpid())
    monkeypatch.setattr(build_mod.time, "strftime", lambda *a: stamp)
    build(col_copy, BuildOptions(progress=False, backend=helpers.SHARED_BACKEND), log=helpers.QUIET)
    new_dir = live_build_dir(col_copy)
    assert new_dir != old_dir and not old_dir.exists()
    assert _builds(col_copy) == [new_dir.name]
    build(col_copy, BuildOptions(progress=False, backend=helpers.SHARED_BACKEND), log=helpers.QUIET)  # once more
    assert _builds(col_copy) == [live_build_dir(col_copy).name]
    monkeypatch.undo()
    assert _results(open_collection(col_copy), names=("bm25", "dense", "dhr")) == expected


def test_failed_build_keeps_the_old_index(col_copy: Path) -> None:
    old_dir = live_build_dir(col_copy)
    with pytest.raises(BadInputError, match="FAISS"):
        build(col_copy, BuildOptions(progress=False, passage_factory="NoSuchIndex42"), log=helpers.QUIET)
    assert live_build_dir(col_copy) == old_dir
    assert _builds(col_copy) == [old_dir.name]
    open_collection(col_copy).warmup()
