"""``hiera check``: a good collection passes; every kind of damage is reported, one line each, exit 1."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import helpers
import numpy as np
import pytest

from hiera.check import check_collection
from hiera.cli import main
from hiera.corpus.store import CorpusStore
from hiera.index.build import BuildOptions, build


def _check(capsys: pytest.CaptureFixture[str], root: Path, *extra: str) -> tuple[int, list[str]]:
    rc = main(["check", str(root), "-q", *extra])
    out = capsys.readouterr().out
    return rc, out.strip().splitlines()


def _failures(lines: list[str]) -> list[str]:
    return [ln for ln in lines if ln.startswith("FAIL ")]


def test_good_collections_pass(shared_root: Path, bm25_copy: Path, capsys) -> None:
    for root in (shared_root, bm25_copy):  # dense + BM25, and BM25 only
        rc, lines = _check(capsys, root)
        assert rc == 0, lines
        assert lines == [f"{root}: OK ({len(check_collection(root))} checks)"]
    names = {f.check for f in check_collection(shared_root)}
    assert {"store", "index", "manifest", "files", "version", "layout", "bm25", "dense", "names"} <= names
    data = json.loads(_json(capsys, shared_root))
    assert data["ok"] is True and data["errors"] == 0
    assert all(c["status"] == "ok" for c in data["checks"])


def _json(capsys, root: Path) -> str:
    assert main(["check", str(root), "--json"]) == 0
    return capsys.readouterr().out


def test_truncated_index_file(bm25_copy: Path, capsys) -> None:
    path = bm25_copy / "index" / "bm25-passages" / "data.csc.index.npy"
    path.write_bytes(path.read_bytes()[:-7])
    rc, lines = _check(capsys, bm25_copy)
    assert rc == 1
    assert len(_failures(lines)) == 1
    assert "index files changed since the build (bm25-passages/data.csc.index.npy)" in _failures(lines)[0]


def test_flipped_bytes_in_an_index_file_are_caught_by_the_checksums(bm25_copy: Path, capsys) -> None:
    path = bm25_copy / "index" / "layout" / "passage_rows.npy"
    data = bytearray(path.read_bytes())
    data[-3] ^= 0xFF
    path.write_bytes(data)
    rc, lines = _check(capsys, bm25_copy)
    assert rc == 1
    assert any("sha256 differs): layout/passage_rows.npy" in ln for ln in _failures(lines))
    # without checksums the damage still shows: that row id is not in the store
    rc, lines = _check(capsys, bm25_copy, "--quick")
    assert rc == 1 and _failures(lines) == ["FAIL layout: 1 row ids of the layout are not in the store (index and corpus disagree)"]


def test_flipped_bytes_in_the_store(bm25_copy: Path, capsys) -> None:
    path = bm25_copy / "corpus.sqlite"
    page = sqlite3.connect(path).execute("PRAGMA page_size").fetchone()[0]
    data = bytearray(path.read_bytes())
    for i in range(3 * page + 3, 3 * page + 7):  # the cell count in a b-tree page's header
        data[i] ^= 0xFF
    path.write_bytes(data)
    rc, lines = _check(capsys, bm25_copy)
    assert rc == 1
    fail = _failures(lines)
    assert len(fail) == 1 and fail[0].startswith("FAIL store: ") and "malformed" in fail[0]
    # and a search on the damaged store is one line too, not a traceback
    assert main(["search", str(bm25_copy), "knight", "-r", "bm25"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "hiera check" in err[0]


def test_deleted_layout_file(bm25_copy: Path, capsys) -> None:
    (bm25_copy / "index" / "layout" / "doc_offsets.npy").unlink()
    rc, lines = _check(capsys, bm25_copy)
    assert rc == 1
    fail = _failures(lines)
    assert fail and "missing layout/doc_offsets.npy" in fail[0]
    assert any(ln.startswith("FAIL layout: ") for ln in fail)


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda m: m.update(passages="many"), "field passages must be an integer, got 'many'"),
        (lambda m: m.pop("documents"), "field documents is missing"),
        (lambda m: m.update(format="hiera-index/1"), "index format 'hiera-index/1'"),
        (lambda m: m["files"].update({"layout/doc_rows.npy": -1}), "field files.layout/doc_rows.npy must be an integer >= 0"),
        (lambda m: m.update(bm25={"k1": "high"}), "field bm25.k1 must be a finite number"),
    ],
)
def test_edited_manifest(bm25_copy: Path, capsys, edit, message: str) -> None:
    path = bm25_copy / "index" / "manifest.json"
    m = json.loads(path.read_text())
    edit(m)
    path.write_text(json.dumps(m))
    rc, lines = _check(capsys, bm25_copy)
    assert rc == 1
    fail = _failures(lines)
    assert len(fail) == 1 and fail[0].startswith("FAIL manifest: ") and message in fail[0], fail
    # searching refuses it with the same field named
    assert main(["search", str(bm25_copy), "knight", "-r", "bm25"]) == 2
    assert message in capsys.readouterr().err


def test_unparsable_manifest(bm25_copy: Path, capsys) -> None:
    (bm25_copy / "index" / "manifest.json").write_text('{"format": "hiera-index/2", ')
    rc, lines = _check(capsys, bm25_copy)
    assert rc == 1 and "unreadable" in _failures(lines)[0]


def test_inconsistent_layout_same_size(bm25_copy: Path, capsys) -> None:
    """Offsets rewritten with the same shape: checksums and the layout check both see it."""
    path = bm25_copy / "index" / "layout" / "doc_offsets.npy"
    offs = np.load(path)
    offs[2], offs[3] = offs[3], offs[2]
    np.save(path, offs)
    rc, lines = _check(capsys, bm25_copy, "--quick")
    assert rc == 1
    assert _failures(lines) == [f"FAIL layout: doc_offsets is not monotone from 0 to {offs[-1]}"]


def test_name_table_that_disagrees_with_itself(bm25_copy: Path, capsys) -> None:
    """A name row pointing past the documents, written with the same size: checksums and the names check see it."""
    path = bm25_copy / "index" / "names" / "doc.npy"
    doc = np.load(path)
    doc[0] = 10_000
    np.save(path, doc)
    rc, lines = _check(capsys, bm25_copy, "--quick")
    assert rc == 1
    assert _failures(lines) == ["FAIL names: a name points at no document"]


def test_stale_index_and_leftovers_are_warnings(bm25_copy: Path, capsys) -> None:
    CorpusStore(bm25_copy).ingest(helpers.make_extra_docs())
    (bm25_copy / "builds" / "20990101-000000-1.partial").mkdir()
    rc, lines = _check(capsys, bm25_copy)
    assert rc == 0, lines
    assert any(ln.startswith("WARN version: stale index: built at corpus version 1, the corpus is at 2") for ln in lines)
    assert any(ln.startswith("WARN builds: leftovers of interrupted builds") for ln in lines)
    build(bm25_copy, BuildOptions(dense=False, progress=False), log=helpers.QUIET)
    rc, lines = _check(capsys, bm25_copy)
    assert rc == 0 and len(lines) == 1  # the build removed the leftover; the index is current


def test_not_a_collection(tmp_path: Path, capsys) -> None:
    assert main(["check", str(tmp_path)]) == 2
    assert "is not a hiera collection" in capsys.readouterr().err


def test_unbuilt_collection_is_ok_with_a_warning(tmp_path: Path, capsys) -> None:
    root = tmp_path / "c"
    CorpusStore(root, create=True).ingest(helpers.make_docs())
    rc, lines = _check(capsys, root)
    assert rc == 0 and lines[0] == "WARN index: no index built yet (run `hiera build`)"


def test_a_missing_index_link_beside_a_build_is_an_error_that_says_how_to_mend_it(bm25_copy: Path, capsys) -> None:
    """Searches fail without the link, so the check fails too (not 'OK' with a warning about old builds)."""
    (build_name,) = [p.name for p in (bm25_copy / "builds").iterdir() if p.is_dir()]
    (bm25_copy / "index").unlink()
    rc, lines = _check(capsys, bm25_copy)
    assert rc == 1, lines
    assert _failures(lines) == [
        f"FAIL index: the index link is missing although builds/ holds {build_name}: searches fail; run "
        f"`hiera build {bm25_copy}` (or link the newest: ln -s builds/{build_name} {bm25_copy / 'index'})"]
    assert not any("builds not in use" in ln for ln in lines)
    (bm25_copy / "index").symlink_to(f"builds/{build_name}")  # the mend it names
    assert _check(capsys, bm25_copy)[0] == 0
