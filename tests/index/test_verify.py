"""The per-build checks (files, BM25, dense) that ``hiera check`` runs on a build and on each shard, called directly."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from hiera.index.manifest import Manifest
from hiera.index.publish import live_build_dir
from hiera.index.verify import Checks, check_bm25, check_dense, check_files


def _run(build_dir: Path, m: Manifest | None = None, checksums: bool = True) -> tuple[bool, Checks]:
    m = m or Manifest.read(build_dir)
    c = Checks()
    sound = check_files(build_dir, m, c, checksums)
    if sound:  # as hiera.check runs them: the indexes are read only when their files are sound
        check_bm25(build_dir, m, c)
        check_dense(build_dir, m, c)
    return sound, c


def _by_status(c: Checks, status: str) -> list[str]:
    return [f.line() for f in c.findings if f.status == status]


def test_a_sound_build_passes_every_check(shared_root: Path) -> None:
    sound, c = _run(live_build_dir(shared_root))
    assert sound and not _by_status(c, "error") and not _by_status(c, "warning")
    assert {f.check for f in c.findings} == {"files", "bm25", "dense"}


def test_a_truncated_file_fails_the_files_check_by_name(bm25_copy: Path) -> None:
    build_dir = live_build_dir(bm25_copy)
    path = build_dir / "bm25-passages" / "data.csc.index.npy"
    path.write_bytes(path.read_bytes()[:-7])
    sound, c = _run(build_dir)
    [error] = _by_status(c, "error")
    assert not sound and error.startswith("FAIL files: ") and "bm25-passages/data.csc.index.npy" in error


def test_same_size_damage_is_caught_only_by_the_checksums(bm25_copy: Path) -> None:
    build_dir = live_build_dir(bm25_copy)
    path = build_dir / "layout" / "passage_rows.npy"
    data = bytearray(path.read_bytes())
    data[-3] ^= 0xFF
    path.write_bytes(data)
    sound, c = _run(build_dir)
    assert not sound and any("sha256 differs): layout/passage_rows.npy" in e for e in _by_status(c, "error"))
    sound, c = _run(build_dir, checksums=False)  # --quick: sizes only
    assert sound and not _by_status(c, "error")


def test_a_file_the_manifest_does_not_list_is_a_warning(bm25_copy: Path) -> None:
    build_dir = live_build_dir(bm25_copy)
    (build_dir / "layout" / "stray.npy").write_bytes(b"x")
    sound, c = _run(build_dir)
    assert sound and not _by_status(c, "error")
    assert any("files the manifest does not list: layout/stray.npy" in w for w in _by_status(c, "warning"))


def test_indexes_must_hold_the_counts_the_manifest_records(shared_root: Path) -> None:
    build_dir = live_build_dir(shared_root)
    m = Manifest.read(build_dir)
    one_more = dataclasses.replace(m, passages=m.passages + 1)
    c = Checks()
    check_bm25(build_dir, one_more, c)
    check_dense(build_dir, one_more, c)
    errors = _by_status(c, "error")
    assert any(e.startswith("FAIL bm25: bm25-passages indexes") for e in errors), errors
    assert any(e.startswith("FAIL dense: passages.f16.npy has shape") for e in errors), errors
