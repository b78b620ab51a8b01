"""The Python API reachable from ``import hiera``: resolved on first use, and the living collection's calls."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import helpers
import pytest

import hiera
from hiera.corpus.store import CorpusStore
from hiera.errors import BadInputError
from hiera.index.publish import live_build_dir
from hiera.retrieve import get_retriever


def test_import_hiera_loads_no_builds_until_asked() -> None:
    code = ("import sys, hiera; before = 'hiera.builds' in sys.modules; f = hiera.remove_documents; "
            "print(before, 'hiera.builds' in sys.modules, f.__module__)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["False", "True", "hiera.builds"]


def test_public_names() -> None:
    import hiera.builds

    for name in ("add_documents", "open_collection", "remove_documents", "select_documents"):
        fn = getattr(hiera, name)
        assert fn is getattr(hiera.builds, name) and fn.__doc__ and name in dir(hiera) and name in hiera.__all__
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        hiera.nope  # noqa: B018


def test_select_then_remove(collection_dir: Path, tmp_path: Path) -> None:
    root = helpers.copy_collection(collection_dir, tmp_path / "col")
    ids = hiera.select_documents(root, ids=["chess"], titles=["Honey bee"])
    assert ids == ["chess", "honey_bee"]
    with pytest.raises(BadInputError, match="no document has the title"):
        hiera.select_documents(root, titles=["No such title"])
    before = CorpusStore(root).stats()["documents"]
    report = hiera.remove_documents(root, ids, log=helpers.QUIET, progress=False)
    assert sorted(report.ids) == ids and report.documents == 2
    assert CorpusStore(root).stats()["documents"] == before - 2
    col = hiera.open_collection(root)
    assert col.build_dir == live_build_dir(root)
    found = {h.doc_id for h in get_retriever("bm25", col).search("worker bees chess knight hive volcano sun", k=10).hits}
    assert found and not found & set(ids)


def test_add_documents_again_and_again_keeps_one_build(collection_dir: Path, tmp_path: Path) -> None:
    root = helpers.copy_collection(collection_dir, tmp_path / "col")
    extra = helpers.make_extra_docs()
    for i, doc in enumerate(extra):
        src = helpers.write_jsonl(tmp_path / f"add{i}.jsonl", [doc])
        one = str(src) if i % 2 else [src]  # one file may be given as itself
        report = hiera.add_documents(root, one, "hiera-jsonl", log=helpers.QUIET, progress=False)
        assert report.documents == 1
        assert [p.name for p in (root / "builds").iterdir() if p.is_dir()] == [live_build_dir(root).name]
    col = hiera.open_collection(root)
    assert {d.id for d in extra} <= {d.id for d in col.iter_docs()}
    with pytest.raises(BadInputError, match="has no index yet"):
        bare = tmp_path / "bare"
        from hiera.corpus.ingest import ingest

        ingest([helpers.write_jsonl(tmp_path / "one.jsonl", extra[:1])], "hiera-jsonl", bare, progress=False)
        hiera.add_documents(bare, [tmp_path / "one.jsonl"], "hiera-jsonl", log=helpers.QUIET, progress=False)


def _open_files(under: Path) -> set[tuple[str, str]]:
    """(fd, target) of this process's descriptors on files under ``under``."""
    import os

    out = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith(str(under.resolve())):
            out.add((fd, target))
    return out


def test_a_closed_collection_lets_everything_go_and_refuses_searches(shared_root: Path) -> None:
    from hiera.errors import HieraError

    before = _open_files(shared_root)
    col = hiera.open_collection(shared_root)
    dhr = get_retriever("dhr", col)
    assert dhr.search(helpers.TOPIC_QUERIES["jazz"], k=3).hits
    opened = _open_files(shared_root) - before
    assert any(t.endswith("corpus.sqlite") for _, t in opened) and not col.closed
    col.close()
    assert col.closed and not opened & _open_files(shared_root)  # the store's connection, the build's lock
    assert "passage_vectors" not in col.__dict__ and "bm25_passages" not in col.__dict__
    with pytest.raises(HieraError, match=f"the collection {shared_root} was closed; open it again"):
        dhr.search(helpers.TOPIC_QUERIES["jazz"], k=3)
    col.close()  # idempotent
    with hiera.open_collection(shared_root) as col2:
        assert get_retriever("bm25", col2).search("jazz", k=1).hits
    assert col2.closed


@pytest.mark.parametrize("name", ["bm25", "dense", "dhr", "hybrid", "fetchhr"])
def test_batch_search_input_shapes(col, name: str) -> None:
    r = get_retriever(name, col)
    assert r.batch_search([], k=3) == []
    with pytest.raises(BadInputError, match="batch_search takes a list of queries"):
        r.batch_search("jazz", k=3)
    with pytest.raises(BadInputError, match="the query is not valid Unicode text"):
        r.search("who \ud800 won", k=3)


def test_get_retriever_refuses_a_path_in_one_line(shared_root: Path) -> None:
    with pytest.raises(BadInputError, match="get_retriever takes an opened collection, not the path"):
        get_retriever("dhr", str(shared_root))
    with pytest.raises(BadInputError, match="pass hiera.open_collection"):
        get_retriever("dhr", shared_root)
    with pytest.raises(BadInputError, match="takes an opened collection .*, not NoneType"):
        get_retriever("dhr", None)


def test_opening_just_after_a_commit_serves_the_committed_build(collection_dir: Path, tmp_path: Path,
                                                                 monkeypatch) -> None:
    """`add` swaps its build in, then commits: an open that saw the link before the commit and the version after
    it looks again instead of calling the collection unbuilt ("run hiera build")."""
    import hiera.collection as collection_module

    root = helpers.copy_collection(collection_dir, tmp_path / "col")
    held = hiera.open_collection(root)  # keeps the build before the add on disk
    before = held.build_dir
    src = helpers.write_jsonl(tmp_path / "add.jsonl", helpers.make_extra_docs()[:1])
    hiera.add_documents(root, [src], "hiera-jsonl", log=helpers.QUIET, progress=False)
    real, looks = collection_module.live_build_dir, []

    def first_look_before_the_commit(r: Path) -> Path | None:
        looks.append(before if not looks else real(r))
        return looks[-1]

    monkeypatch.setattr(collection_module, "live_build_dir", first_look_before_the_commit)
    with hiera.open_collection(root) as col:
        assert col.build_dir == real(root) != before and len(looks) >= 2
    held.close()
