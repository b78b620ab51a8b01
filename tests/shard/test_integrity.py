"""Shards that are missing or stale are refused by name; builds stay atomic; check and add know shards."""

from __future__ import annotations

import json
from pathlib import Path

import helpers
import pytest
from shard.compare import QUERIES, assert_same

import hiera.shard.build as shard_build
from hiera.builds import build_collection, open_collection
from hiera.check import check_collection
from hiera.collection import LocalCollection
from hiera.errors import HieraError
from hiera.index.build import BuildOptions
from hiera.retrieve import get_retriever


def _shard_dir(root: Path, name: str) -> Path:
    return (root / "index").resolve() / "shards" / name


def test_missing_shard_file_is_refused_by_name(sharded3_copy: Path) -> None:
    (_shard_dir(sharded3_copy, "001") / "dense" / "passages.faiss").unlink()
    with pytest.raises(HieraError, match=r"shard 001 .* is incomplete: missing dense/passages.faiss"):
        open_collection(sharded3_copy)


def test_missing_shard_directory_is_refused_by_name(sharded3_copy: Path) -> None:
    import shutil

    shutil.rmtree(_shard_dir(sharded3_copy, "002"))
    with pytest.raises(HieraError, match=r"shard 002 .* is missing"):
        open_collection(sharded3_copy)


def test_stale_shard_is_refused_by_name(sharded3_copy: Path, sharded1: Path) -> None:
    """A shard directory from another build (its manifest is not the one recorded) is refused."""
    import shutil

    target = _shard_dir(sharded3_copy, "000")
    shutil.rmtree(target)
    shutil.copytree(_shard_dir(sharded1, "000"), target)
    with pytest.raises(HieraError, match=r"shard 000 .* is stale: its manifest is not the one this build recorded"):
        open_collection(sharded3_copy)


def test_changed_shard_file_is_refused_by_name(sharded3_copy: Path) -> None:
    path = _shard_dir(sharded3_copy, "002") / "dense" / "docs.f16.npy"
    path.write_bytes(path.read_bytes() + b"\0" * 16)
    with pytest.raises(HieraError, match=r"shard 002 .* is stale: files changed since the build \(dense/docs.f16.npy\)"):
        open_collection(sharded3_copy)


def test_check_understands_shards(sharded3_copy: Path) -> None:
    findings = check_collection(sharded3_copy)
    assert not [f for f in findings if f.status == "error"], [f.line() for f in findings]
    assert any(f.check == "shards" and f.status == "ok" and "3 shards" in f.detail for f in findings)
    assert not any(f.check == "files" and f.status == "warning" for f in findings)
    path = _shard_dir(sharded3_copy, "001") / "bm25-passages" / "params.index.json"
    if not path.exists():
        path = next(p for p in (_shard_dir(sharded3_copy, "001") / "bm25-passages").iterdir() if p.is_file())
    data = bytearray(path.read_bytes())
    data[0] ^= 0xFF
    path.write_bytes(bytes(data))
    errors = [f for f in check_collection(sharded3_copy) if f.status == "error"]
    assert errors and all("shard 001" in f.detail for f in errors), [f.line() for f in errors]


def test_killed_sharded_build_leaves_the_old_index_live(sharded3_copy: Path, shard_cache: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    live = (sharded3_copy / "index").resolve()
    calls = {"n": 0}
    real = shard_build.build_shard

    def dies_on_second(*args: object) -> object:
        calls["n"] += 1
        if calls["n"] == 2:
            raise KeyboardInterrupt  # the process being stopped half-way
        return real(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(shard_build, "build_shard", dies_on_second)
    with pytest.raises(KeyboardInterrupt):
        build_collection(sharded3_copy, BuildOptions(progress=False, cache_dir=shard_cache, shards=2), log=lambda m: None)
    assert (sharded3_copy / "index").resolve() == live
    assert not list((sharded3_copy / "builds").glob("*.partial"))
    assert len(open_collection(sharded3_copy).manifest.shards) == 3


def test_rebuild_unsharded_then_add_keeps_shards(sharded3_copy: Path, unsharded: Path, shard_cache: Path) -> None:
    """Unsharded after sharded (nothing reused from shard files), then sharded again; `add` keeps the shard count."""
    opts = BuildOptions(progress=False, cache_dir=shard_cache)
    build_collection(sharded3_copy, opts, log=lambda m: None)
    col = open_collection(sharded3_copy)
    assert type(col) is LocalCollection
    ref = get_retriever("dense", open_collection(unsharded)).search(QUERIES[0], k=10)
    assert_same(ref.hits, get_retriever("dense", col).search(QUERIES[0], k=10).hits, "unsharded rebuild")
    build_collection(sharded3_copy, BuildOptions(progress=False, cache_dir=shard_cache, shards=2), log=lambda m: None)
    assert len(open_collection(sharded3_copy).manifest.shards) == 2
    assert BuildOptions.from_manifest(open_collection(sharded3_copy).manifest).shards == 2


def test_in_process_server_answers_like_one_index(unsharded: Path, sharded3: Path) -> None:
    """Without --engine ray, a sharded collection is served in one process, the same JSON."""
    from fastapi.testclient import TestClient

    from hiera.serve.api import create_app

    with TestClient(create_app(unsharded, warmup=False, api_key="")) as one, \
            TestClient(create_app(sharded3, warmup=False, api_key="")) as three:
        for retriever, level in (("dhr", "passage"), ("hybrid", "doc"), ("bm25-doc", "doc"), ("dense", "passage")):
            params = {"q": QUERIES[0], "retriever": retriever, "level": level, "k": 10}
            a, b = one.get("/search", params=params), three.get("/search", params=params)
            assert a.status_code == b.status_code == 200, b.text
            assert_same(a.json()["hits"], b.json()["hits"], f"http {retriever} {level}")
        assert json.dumps(one.get("/methods").json()) == json.dumps(three.get("/methods").json())


def test_cli_builds_shards_and_refuses_what_it_cannot_do(unsharded: Path, tmp_path: Path, shard_cache: Path,
                                                         capsys: pytest.CaptureFixture[str],
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    from hiera.cli import main

    monkeypatch.setenv("HIERA_CACHE_DIR", str(shard_cache))
    col = helpers.copy_collection(unsharded, tmp_path / "col")
    assert main(["build", str(col), "--shards", "2", "--quiet"]) == 0
    assert len(open_collection(col).manifest.shards) == 2
    assert main(["build", str(col), "--engine", "ray", "--quiet"]) == 2
    assert "--engine ray builds shards: give --shards N" in capsys.readouterr().err
    assert main(["build", str(col), "--shards", "99", "--quiet"]) == 2
    assert "cannot split 8 documents into 99 shards" in capsys.readouterr().err
    assert main(["check", str(col)]) == 0
    # a plain (unsharded) collection cannot be served by Ray Serve: refused before Ray starts
    assert main(["serve", str(unsharded), "--engine", "ray"]) == 2
    assert "is not sharded" in capsys.readouterr().err


def test_add_to_a_sharded_collection_stays_sharded_and_exact(unsharded: Path, tmp_path: Path, shard_cache: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """`hiera add` rebuilds with the same shard count; the result equals one index over all documents."""
    from hiera.cli import main

    monkeypatch.setenv("HIERA_CACHE_DIR", str(shard_cache))
    root = helpers.build_collection(tmp_path / "col", helpers.make_docs(),
                                    BuildOptions(progress=False, cache_dir=shard_cache, shards=3))
    src = helpers.write_jsonl(tmp_path / "extra.jsonl", helpers.make_extra_docs())
    assert main(["add", str(root), str(src), "--format", "hiera-jsonl", "--quiet"]) == 0
    col = open_collection(root)
    assert len(col.manifest.shards) == 3 and col.n_passages == open_collection(unsharded).n_passages
    for name in ("bm25", "dhr"):
        a = get_retriever(name, open_collection(unsharded)).search(QUERIES[0], k=10)
        assert_same(a.hits, get_retriever(name, col).search(QUERIES[0], k=10).hits, f"after add: {name}")
