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

    for name in ("open_collection", "remove_documents", "select_documents"):
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
