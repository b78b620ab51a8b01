"""``hiera check`` on a changed build: tombstones against the store and the manifest, each segment's index sizes."""

from __future__ import annotations

import json
from pathlib import Path

import helpers
import numpy as np
import pytest

from hiera.corpus.store import CorpusStore
from hiera.index.manifest import MANIFEST
from hiera.index.publish import live_build_dir
from hiera.index.segments import TOMBSTONES

SEGMENT = ("--compact-at", "1")


@pytest.fixture
def changed(bm25_copy: Path, tmp_path: Path, capsys) -> Path:
    """The BM25 collection after an add (a delta of two documents) and a removal (one base document tombstoned)."""
    src = helpers.write_jsonl(tmp_path / "extra.jsonl", helpers.make_extra_docs())
    assert helpers.run_cli(capsys, "add", str(bm25_copy), str(src), "-f", "hiera-jsonl", *SEGMENT, "-q")[0] == 0
    assert helpers.run_cli(capsys, "remove", str(bm25_copy), "--ids", "jazz", *SEGMENT, "-q")[0] == 0
    return bm25_copy


def _check(capsys, root: Path, *extra: str) -> tuple[int, list[str]]:
    rc, out, _ = helpers.run_cli(capsys, "check", str(root), *extra)
    return rc, out.splitlines()


def _failures(lines: list[str]) -> list[str]:
    return [ln for ln in lines if ln.startswith("FAIL")]


def test_a_changed_collection_checks_clean(changed: Path, bm25_root: Path, capsys) -> None:
    rc, lines = _check(capsys, changed)
    assert rc == 0, lines
    jazz = sum(1 for _ in CorpusStore(bm25_root).iter_passages(["jazz"]))
    extra = sum(1 for _ in CorpusStore(changed).iter_passages(["honeybees", "lighthouses"]))
    assert f"ok   tombstones: generation 2: 1 dead documents ({jazz} passages) gone from the store; delta 2 documents, " \
           f"{extra} passages" in lines
    base = CorpusStore(bm25_root).stats()
    assert f"ok   bm25: passages {base['passages'] + extra}, documents {base['documents'] + 2}" in lines


def test_a_live_position_added_to_the_tombstones_is_reported(changed: Path, capsys) -> None:
    path = live_build_dir(changed) / TOMBSTONES
    dead = np.load(path)
    np.save(path, np.sort(np.concatenate([dead, [0]])))  # volcanoes, still in the store
    rc, lines = _check(capsys, changed, "--quick")
    assert rc == 1
    fails = [f for f in _failures(lines) if not f.startswith("FAIL files: ")]  # its size changed, too
    assert len(fails) == 1 and fails[0].startswith("FAIL tombstones: ")
    assert "the manifest counts 1 dead documents, the tombstones 2" in fails[0]
    assert "1 tombstoned documents are still in the store" in fails[0]


def test_a_dead_position_left_out_of_the_tombstones_is_reported(changed: Path, capsys) -> None:
    path = live_build_dir(changed) / TOMBSTONES
    np.save(path, np.zeros(0, dtype=np.int64))
    rc, lines = _check(capsys, changed, "--quick")
    assert rc == 1
    fails = _failures(lines)
    assert any(f.startswith("FAIL layout: ") and "are not in the store and not tombstoned" in f for f in fails)
    assert any(f.startswith("FAIL tombstones: ") and "the manifest counts 1 dead documents, the tombstones 0" in f
               for f in fails)


def test_tombstones_out_of_range_are_reported(changed: Path, capsys) -> None:
    np.save(live_build_dir(changed) / TOMBSTONES, np.asarray([99], dtype=np.int64))
    rc, lines = _check(capsys, changed, "--quick")
    assert rc == 1 and "FAIL tombstones: tombstones.npy names positions outside the base's 0..5" in lines


def test_a_delta_count_that_disagrees_with_its_files_is_reported(changed: Path, capsys) -> None:
    path = live_build_dir(changed) / MANIFEST
    data = json.loads(path.read_text())
    data["updates"]["delta"]["passages"] += 1
    path.write_text(json.dumps(data))
    rc, lines = _check(capsys, changed, "--quick")
    assert rc == 1
    n = data["updates"]["delta"]["passages"]
    assert f"FAIL bm25: delta/bm25-passages indexes {n - 1} texts, the manifest {n}" in lines


def test_a_missing_delta_is_reported(changed: Path, capsys) -> None:
    import shutil

    shutil.rmtree(live_build_dir(changed) / "delta")
    rc, lines = _check(capsys, changed, "--quick")
    assert rc == 1
    assert any(f.startswith("FAIL tombstones: ") and "delta/ is missing" in f for f in _failures(lines))
