"""Index builds: the manifest, refusal of mismatched or stale indexes, incremental add (publishing: test_publish.py)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import helpers
import numpy as np
import pytest

import hiera.index.build as build_mod
from hiera.builds import open_collection
from hiera.cli import main
from hiera.collection import Collection
from hiera.corpus.store import CorpusStore
from hiera.corpus.tree import PassageRules
from hiera.encode import Encoder, model_fingerprint, resolve_model_path
from hiera.errors import BadInputError, HieraError, IndexMissingError, ManifestMismatchError
from hiera.index.bm25 import Bm25Config
from hiera.index.build import BuildOptions, build
from hiera.index.dense import faiss_module
from hiera.index.manifest import FORMAT, MANIFEST, Manifest
from hiera.index.publish import BUILDS, INDEX_LINK, live_build_dir
from hiera.retrieve import get_retriever

QUERIES = list(helpers.TOPIC_QUERIES.items())[:6]


@pytest.fixture(scope="session")
def other_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of MiniLM whose config.json differs by one key: another fingerprint."""
    dst = tmp_path_factory.mktemp("models") / "other-minilm"
    shutil.copytree(resolve_model_path("all-MiniLM-L6-v2"), dst)
    cfg = json.loads((dst / "config.json").read_text(encoding="utf-8"))
    cfg["hiera_test_marker"] = True
    (dst / "config.json").write_text(json.dumps(cfg), encoding="utf-8")
    return dst


# -- the manifest ---------------------------------------------------------
def test_manifest_records_models_rules_and_files(shared_root: Path) -> None:
    build_dir = live_build_dir(shared_root)
    assert build_dir is not None and build_dir.parent == shared_root / BUILDS
    assert (shared_root / INDEX_LINK).is_symlink()
    assert not os.path.isabs(os.readlink(shared_root / INDEX_LINK))  # copies of the directory keep working
    m = Manifest.read(build_dir)
    store = CorpusStore(shared_root)
    stats = store.stats()

    assert m.format == FORMAT
    assert m.corpus_version == store.version == stats["version"]
    assert (m.documents, m.passages) == (stats["documents"], stats["passages"])
    assert m.passage_rules == PassageRules().to_dict()

    fp = model_fingerprint(resolve_model_path("all-MiniLM-L6-v2"))
    assert set(m.models) == {"passage", "doc"}
    for info in m.models.values():
        assert info["fingerprint"] == fp and len(fp) == 64
        assert info["dim"] == 384
        assert info["name"] == "all-MiniLM-L6-v2"
        assert Path(info["path"]) == resolve_model_path("all-MiniLM-L6-v2")
        assert info["max_seq_length"] > 0

    # the options the build ran with (the shared collection's are the defaults), so that `hiera add` can reuse them
    asked = BuildOptions()
    assert m.bm25 is not None
    assert Bm25Config.from_dict(m.bm25) == asked.bm25_config and m.bm25["doc_text"] == asked.bm25_doc_text
    # no factory asked: the profile's, which a six-document collection's auto profile makes Flat
    assert asked.passage_factory is None and m.profile["name"] == "small" and m.profile["asked"] == asked.profile
    assert m.faiss == {"passage": "Flat", "doc": "Flat"}
    assert m.defaults == {}  # nothing set at build time: the registry's defaults apply
    for pkg in ("hiera", "python", "numpy", "faiss-cpu", "bm25s", "torch", "sentence-transformers"):
        assert m.versions.get(pkg), pkg

    for f in (
        "layout/passage_rows.npy",
        "layout/doc_rows.npy",
        "layout/doc_offsets.npy",
        "dense/passages.f16.npy",
        "dense/docs.f16.npy",
        "dense/docs-mean.f16.npy",
        "dense/passages.faiss",
        "dense/docs.faiss",
    ):
        assert f in m.files, f
    assert any(f.startswith("bm25-passages/") for f in m.files)
    assert any(f.startswith("bm25-docs/") for f in m.files)
    actual = {str(p.relative_to(build_dir)): p.stat().st_size for p in build_dir.rglob("*") if p.is_file()}
    assert actual.pop(MANIFEST) > 0
    assert actual == m.files  # every file recorded, with its size; no leftovers (.tmp)


def test_layout_matches_the_store(col: Collection) -> None:
    docs = list(col.store.iter_docs())
    passages = list(col.store.iter_passages())
    assert col.doc_rows.tolist() == [d.rowid for d in docs]
    assert col.passage_rows.tolist() == [r for r, _ in passages]
    counts = [sum(1 for _, p in passages if p.doc_id == d.id) for d in docs]
    assert col.doc_offsets.tolist() == np.concatenate(([0], np.cumsum(counts))).tolist()
    assert col.passage_doc.tolist() == [i for i, n in enumerate(counts) for _ in range(n)]
    dim = col.manifest.models["passage"]["dim"]
    assert col.passage_vectors.shape == (len(passages), dim) and col.passage_vectors.dtype == np.float16
    assert col.doc_vectors.shape == (len(docs), dim)
    assert col.passage_faiss.ntotal == len(passages) and col.doc_faiss.ntotal == len(docs)
    assert col.bm25_passages.size == len(passages) and col.bm25_docs.size == len(docs)
    norms = np.linalg.norm(col.passage_vectors.astype(np.float32), axis=1)
    np.testing.assert_allclose(norms, 1.0, atol=2e-3)


# -- refusals --------------------------------------------------------------
def test_other_model_is_refused(shared_root: Path, other_model: Path) -> None:
    assert model_fingerprint(other_model) != model_fingerprint(resolve_model_path("minilm"))
    for level in ("passage_encoder", "doc_encoder"):
        with pytest.raises(ManifestMismatchError) as exc:
            open_collection(shared_root, **{level: str(other_model)})
        msg = str(exc.value)
        assert "fingerprint" in msg and str(other_model) in msg and "hiera build" in msg
    # the model the index was built with is accepted, by alias or by path
    open_collection(shared_root, passage_encoder="minilm", doc_encoder=str(resolve_model_path("minilm")))


def test_model_changed_after_the_build_is_refused(col_copy: Path, tmp_path: Path) -> None:
    model = tmp_path / "model"
    shutil.copytree(resolve_model_path("minilm"), model)
    build(col_copy, BuildOptions(progress=False, passage_encoder=str(model), doc_encoder=str(model)), log=helpers.QUIET)
    col = open_collection(col_copy)
    assert col.manifest.models["passage"]["path"] == str(model)
    cfg = json.loads((model / "config.json").read_text(encoding="utf-8"))
    cfg["changed"] = 1
    (model / "config.json").write_text(json.dumps(cfg), encoding="utf-8")
    with pytest.raises(ManifestMismatchError, match="changed since"):
        open_collection(col_copy).passage_encoder  # noqa: B018
    with pytest.raises(ManifestMismatchError):
        get_retriever("dense", open_collection(col_copy)).search("volcano")


@pytest.mark.parametrize(
    ("victim", "action", "error"),
    [
        ("dense/passages.faiss", "delete", IndexMissingError),
        ("layout/doc_offsets.npy", "delete", IndexMissingError),
        ("dense/docs.f16.npy", "truncate", ManifestMismatchError),
        ("bm25-passages", "grow", ManifestMismatchError),
    ],
)
def test_missing_or_changed_index_file_is_named(col_copy: Path, victim: str, action: str, error: type) -> None:
    build_dir = live_build_dir(col_copy)
    if victim == "bm25-passages":  # any file of the BM25 index
        victim = next(f for f in Manifest.read(build_dir).files if f.startswith("bm25-passages/"))
    path = build_dir / victim
    if action == "delete":
        path.unlink()
    elif action == "truncate":
        path.write_bytes(path.read_bytes()[:-10])
    else:
        path.write_bytes(path.read_bytes() + b"\0")
    with pytest.raises(error) as exc:
        open_collection(col_copy)
    assert victim in str(exc.value)
    assert "hiera build" in str(exc.value)


def test_missing_or_unreadable_manifest(col_copy: Path) -> None:
    build_dir = live_build_dir(col_copy)
    (build_dir / MANIFEST).write_text("{not json", encoding="utf-8")
    with pytest.raises(IndexMissingError, match="unreadable"):
        open_collection(col_copy)
    (build_dir / MANIFEST).write_text(json.dumps({"format": "hiera-index/0"}), encoding="utf-8")
    with pytest.raises(ManifestMismatchError, match="hiera-index/0"):
        open_collection(col_copy)
    (build_dir / MANIFEST).unlink()
    with pytest.raises(IndexMissingError, match="manifest.json"):
        open_collection(col_copy)
    (col_copy / INDEX_LINK).unlink()
    with pytest.raises(IndexMissingError, match="no index"):
        open_collection(col_copy)


def test_stale_index_after_a_new_ingest(col_copy: Path) -> None:
    CorpusStore(col_copy).ingest(helpers.make_extra_docs()[:1])
    with pytest.raises(ManifestMismatchError) as exc:
        open_collection(col_copy)
    msg = str(exc.value)
    assert "version 1" in msg and "version 2" in msg and f"hiera build {col_copy}" in msg
    build(col_copy, BuildOptions(progress=False), log=helpers.QUIET)
    assert open_collection(col_copy).n_docs == 7


def test_build_refuses_bad_requests(col_copy: Path, tmp_path: Path) -> None:
    with pytest.raises(BadInputError, match="document text"):
        build(col_copy, BuildOptions(progress=False, bm25_doc_text="title"), log=helpers.QUIET)
    empty = tmp_path / "empty"
    CorpusStore(empty, create=True)
    with pytest.raises(BadInputError, match="no passages"):
        build(empty, BuildOptions(progress=False), log=helpers.QUIET)
    with pytest.raises(IndexMissingError):
        build(tmp_path / "not-a-collection", BuildOptions(progress=False), log=helpers.QUIET)


# -- incremental add ---------------------------------------------------------
def test_add_appends_without_reencoding_old_texts(col_copy: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    empty_cache = tmp_path / "empty-cache"  # no cached embeddings: only the previous build can explain reuse
    monkeypatch.setenv("HIERA_CACHE_DIR", str(empty_cache))
    old = open_collection(col_copy)
    old_p = np.array(old.passage_vectors)
    old_d = np.array(old.doc_vectors)
    old_mean = np.array(old.doc_mean_vectors)
    n_old = old.passage_faiss.ntotal
    assert old.doc_faiss.ntotal == 6
    old_names = set(old.name_index()[0].names)

    store = CorpusStore(col_copy)
    report = store.ingest(helpers.make_extra_docs())
    new_ids = report.new_doc_ids
    assert new_ids == ["honeybees", "lighthouses"]

    encoded: list[str] = []
    real_encode = Encoder._encode

    def spy(self, texts, show_progress=False):
        encoded.extend(texts)
        return real_encode(self, texts, show_progress)

    fresh: list[np.ndarray] = []
    real_build_faiss = build_mod.build_faiss

    def spy_build_faiss(vectors, factory="Flat", seed=0):
        fresh.append(np.array(vectors))
        return real_build_faiss(vectors, factory, seed)

    loaded: list[str] = []
    real_load_faiss = build_mod.load_faiss

    def spy_load_faiss(path, mmap=True):
        loaded.append(str(Path(path).relative_to(col_copy)))
        return real_load_faiss(path, mmap)

    monkeypatch.setattr(Encoder, "_encode", spy)
    monkeypatch.setattr(build_mod, "build_faiss", spy_build_faiss)
    monkeypatch.setattr(build_mod, "load_faiss", spy_load_faiss)
    build(col_copy, BuildOptions(progress=False, cache_dir=empty_cache, backend=helpers.SHARED_BACKEND),
          log=helpers.QUIET)
    monkeypatch.undo()

    new_passages = [p for _, p in store.iter_passages(new_ids)]
    new_names = [n for n in open_collection(col_copy).name_index()[0].names if n not in old_names]
    assert new_names and set(new_names) <= {d.title for d in store.iter_docs(new_ids)}
    expected = [p.titled_text(", ") for p in new_passages] + [d.summary for d in store.iter_docs(new_ids)] + new_names
    assert sorted(encoded) == sorted(expected)  # (b) only the new documents' texts and names were encoded

    # (c) both FAISS indexes were loaded from the previous build and appended to, not rebuilt (the names'
    # index is rebuilt: a name's row moves when an alias or a new title shares its key; its vectors are copied)
    old_build = old.build_dir.relative_to(col_copy)
    assert sorted(loaded) == [str(old_build / "dense" / "docs.faiss"), str(old_build / "dense" / "passages.faiss")]
    col = open_collection(col_copy)
    for vecs in fresh:  # whatever else is built fresh (mean vectors, names), it is neither of those two
        assert vecs.shape[0] != col.n_passages
        assert vecs.shape != col.doc_vectors.shape or not np.allclose(vecs, col.doc_vectors.astype(np.float32), atol=1e-2)
    assert col.passage_faiss.ntotal == n_old + len(new_passages) == 39
    assert col.doc_faiss.ntotal == 8
    assert (col.n_docs, col.n_passages) == (8, 39)
    np.testing.assert_array_equal(col.passage_vectors[:n_old], old_p)
    np.testing.assert_array_equal(col.doc_vectors[:6], old_d)
    np.testing.assert_allclose(col.doc_mean_vectors[:6], old_mean, atol=2e-3)  # means of float16-rounded rows
    # the appended documents' aggregate vectors are the normalized means of their own passages
    P = col.passage_vectors.astype(np.float32)
    for d in (6, 7):
        m = P[col.doc_offsets[d] : col.doc_offsets[d + 1]].mean(axis=0)
        np.testing.assert_allclose(col.doc_mean_vectors[d].astype(np.float32), m / np.linalg.norm(m), atol=2e-3)
    # the appended FAISS rows are the new vectors, in layout order
    faiss = faiss_module()
    flat = faiss.downcast_index(col.passage_faiss)
    appended = faiss.rev_swig_ptr(flat.get_xb(), flat.ntotal * flat.d).reshape(flat.ntotal, flat.d)
    np.testing.assert_allclose(appended[n_old:], col.passage_vectors[n_old:].astype(np.float32), atol=1e-3)

    # (a) the new documents are findable by every kind of search, and the old ones still are
    ids = [*new_ids, *(d for d, _ in QUERIES[:3])]
    qs = [helpers.TOPIC_QUERIES[d] for d in ids]
    for name in ("bm25", "dense", "dhr", "hybrid", "bm25-dhr"):
        top = [res[0].doc_id for res in get_retriever(name, col).batch_search(qs, k=3)]
        assert top == ids, name
    top = [res[0].doc_id for res in get_retriever("dhr", col).batch_search(qs, k=3, level="doc")]
    assert top == ids


def test_cli_add_end_to_end(col_copy: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    monkeypatch.setenv("HIERA_CACHE_DIR", str(tmp_path / "cache"))
    src = helpers.write_jsonl(tmp_path / "new.jsonl", helpers.make_extra_docs())
    assert main(["add", str(col_copy), str(src), "--format", "hiera-jsonl", "--quiet"]) == 0
    err = capsys.readouterr().err
    assert "ingested 2 documents (0 replaced)" in err

    col = open_collection(col_copy)
    assert (col.n_docs, col.n_passages) == (8, 39)
    assert col.manifest.corpus_version == col.store.version == 2
    for name in ("bm25", "dense", "dhr"):
        got = get_retriever(name, col).batch_search([helpers.TOPIC_QUERIES[d] for d in ("lighthouses", "honeybees")], k=1)
        assert [r[0].doc_id for r in got] == ["lighthouses", "honeybees"]

    # a bad source changes nothing and exits 2 with one line
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "x"\n', encoding="utf-8")
    assert main(["add", str(col_copy), str(bad), "--format", "hiera-jsonl", "-q"]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "line 1" in err and "Traceback" not in err
    assert open_collection(col_copy).n_docs == 8

    # add needs an index
    fresh = tmp_path / "fresh"
    CorpusStore(fresh, create=True)
    assert main(["add", str(fresh), str(src), "--format", "hiera-jsonl", "-q"]) == 2
    assert "hiera build" in capsys.readouterr().err


# -- other index types --------------------------------------------------------
def test_hnsw_matches_flat(shared_root: Path, col_copy: Path) -> None:
    m = build(
        col_copy,
        BuildOptions(progress=False, passage_factory="HNSW32", doc_factory="HNSW32", backend=helpers.SHARED_BACKEND),
        log=helpers.QUIET,
    )
    assert m.faiss == {"passage": "HNSW32", "doc": "HNSW32"}
    hnsw, flat = open_collection(col_copy), open_collection(shared_root)
    faiss = faiss_module()
    assert isinstance(faiss.downcast_index(hnsw.passage_faiss), faiss.IndexHNSWFlat)
    assert isinstance(faiss.downcast_index(hnsw.doc_faiss), faiss.IndexHNSWFlat)
    qs = [q for _, q in QUERIES[:4]]
    for name, level in (("dense", "passage"), ("dense", "doc"), ("dhr", "passage"), ("dhr", "doc")):
        got = get_retriever(name, hnsw).batch_search(qs, k=5, level=level)
        want = get_retriever(name, flat).batch_search(qs, k=5, level=level)
        for q, a, b in zip(qs, got, want, strict=True):
            assert a[0].doc_id == b[0].doc_id and a[0].passage_id == b[0].passage_id, (name, level, q)
            assert [h.passage_id or h.doc_id for h in a] == [h.passage_id or h.doc_id for h in b]
            np.testing.assert_allclose([h.score for h in a], [h.score for h in b], atol=1e-3)  # float16 reuse
            for h in a:
                for name_, stage in h.stages.items():
                    if name_ != "bm25":  # the hybrid passage stage shows the raw BM25 score, unbounded
                        assert -1.0 - 1e-5 <= stage.score <= 1.0 + 1e-5
                if name == "dense":
                    assert -1.0 - 1e-5 <= h.score <= 1.0 + 1e-5


def _stage(stage: str) -> dict:
    return {"dhr": {"doc_stage": stage}}


def test_doc_stage_must_fit_the_indexes(col_copy: Path) -> None:
    before = open_collection(col_copy).build_dir
    for stage in ("hybrid-max", "summary", "fused"):
        with pytest.raises(BadInputError, match="needs the dense"):
            build(col_copy, BuildOptions(progress=False, dense=False, defaults=_stage(stage)), log=helpers.QUIET)
    with pytest.raises(BadInputError, match="needs the bm25"):
        build(col_copy, BuildOptions(progress=False, bm25=False, defaults=_stage("bm25-passage-max")), log=helpers.QUIET)
    with pytest.raises(BadInputError, match="doc_stage=abstracts"):
        build(col_copy, BuildOptions(progress=False, defaults=_stage("abstracts")), log=helpers.QUIET)
    assert open_collection(col_copy).build_dir == before  # nothing was swapped in
    build(col_copy, BuildOptions(progress=False, bm25=False), log=helpers.QUIET)
    # the default ("auto") adapts to what is built
    dense_only = get_retriever("dhr", open_collection(col_copy))
    assert dense_only.defaults["doc_stage"] == "passage-max"
    # so does the hybrid passage stage: without BM25, the paper's dense-only one, and searches work
    assert dense_only.defaults["passage_alpha"] == 0.0
    assert dense_only.search(helpers.TOPIC_QUERIES["chess"], k=3).hits[0].doc_id == "chess"
    with pytest.raises(IndexMissingError):  # asked for explicitly, the BM25 stage is refused, not dropped
        dense_only.search(helpers.TOPIC_QUERIES["chess"], k=3, passage_alpha=0.5)
    m = build(col_copy, BuildOptions(progress=False, defaults=_stage("summary")), log=helpers.QUIET)
    assert m.defaults == {"dhr": {"doc_stage": "summary"}}
    assert get_retriever("dhr", open_collection(col_copy)).defaults["doc_stage"] == "summary"


def test_a_model_path_set_at_build_is_saved_absolute(col_copy: Path, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """A relative directory given to ``build --set`` names the same directory for a search started elsewhere;
    a URL is left as given."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    (tmp_path / "models" / "sets").mkdir(parents=True)
    (tmp_path / "home" / "heads").mkdir(parents=True)
    defaults = {"sets": {"classifier": "models/sets", "parser_url": "http://127.0.0.1:9/v1", "candidates": 7},
                "fetchhr": {"model": "~/heads"}}
    m = build(col_copy, BuildOptions(progress=False, dense=False, defaults=defaults), log=helpers.QUIET)
    assert m.defaults["sets"] == {"classifier": str(tmp_path / "models" / "sets"),
                                  "parser_url": "http://127.0.0.1:9/v1", "candidates": 7}
    assert m.defaults["fetchhr"] == {"model": str(tmp_path / "home" / "heads")}
    with pytest.raises(BadInputError, match="no directory at"):  # a typo is refused now, not at every search
        build(col_copy, BuildOptions(progress=False, dense=False, defaults={"sets": {"classifier": "modles/sets"}}),
              log=helpers.QUIET)


def test_manifest_with_unknown_defaults_is_refused(col_copy: Path) -> None:
    col = open_collection(col_copy)
    path = col.build_dir / "manifest.json"
    data = json.loads(path.read_text())
    data["defaults"] = {"dhr": {"doc_stage": "from-the-future"}}
    path.write_text(json.dumps(data))
    with pytest.raises(ManifestMismatchError, match="from-the-future"):
        open_collection(col_copy)


def test_manifest_of_an_older_format_is_refused(col_copy: Path) -> None:
    path = open_collection(col_copy).build_dir / "manifest.json"
    data = json.loads(path.read_text())
    data["format"] = "hiera-index/1"
    path.write_text(json.dumps(data))
    with pytest.raises(ManifestMismatchError, match="rebuild"):
        open_collection(col_copy)


def test_bm25_only_build(col_copy: Path) -> None:
    m = build(col_copy, BuildOptions(progress=False, dense=False), log=helpers.QUIET)
    assert m.models == {} and m.faiss == {}
    col = open_collection(col_copy)
    assert not col.has_dense
    assert not (col.build_dir / "dense").exists()
    for name in ("bm25", "bm25-dhr", "bm25-doc"):  # every BM25 method serves without a dense index
        assert get_retriever(name, col).search(helpers.TOPIC_QUERIES["chess"], k=1)[0].doc_id == "chess", name
    for name in ("dense", "dhr", "hybrid"):
        with pytest.raises(IndexMissingError, match="hiera build"):
            get_retriever(name, col).search("chess")
    with pytest.raises(HieraError):
        open_collection(col_copy, passage_encoder="minilm")


def test_vectors_encoded_in_blocks_equal_one_block(shared_root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A build encodes (and reads the cache) a block of texts at a time; the matrices are those of one call."""
    monkeypatch.setattr(build_mod, "ENCODE_BLOCK", 2)
    calls: list[int] = []
    real = Encoder.encode_document

    def counting(self, texts, **kw):  # type: ignore[no-untyped-def]
        calls.append(len(texts))
        return real(self, texts, **kw)

    monkeypatch.setattr(Encoder, "encode_document", counting)
    opts = BuildOptions(progress=False, backend=helpers.SHARED_BACKEND)
    root = helpers.build_collection(tmp_path / "blocks", helpers.make_docs(), opts)
    assert calls and max(calls) <= 2
    for name in ("passages", "docs", "docs-mean", "names"):
        a = np.load(live_build_dir(root) / "dense" / f"{name}.f16.npy")
        b = np.load(live_build_dir(shared_root) / "dense" / f"{name}.f16.npy")
        assert a.dtype == np.float16
        np.testing.assert_array_equal(a, b, err_msg=name)


def test_a_build_without_bm25_serves_only_what_it_can(col_copy: Path) -> None:
    """``passage_alpha`` > 0 needs BM25: asked of a ``--no-bm25`` build it is refused in one line; carried from a
    tuning (with a BM25 document stage) it gives way to the method's own default, so the default search works."""
    from hiera.eval.tune import save_tuned

    with pytest.raises(BadInputError, match="passage_alpha=0.2 mixes BM25 into the passage stage"):
        build(col_copy, BuildOptions(progress=False, bm25=False, backend=helpers.SHARED_BACKEND,
                                     defaults={"dhr": {"passage_alpha": 0.2}}), log=helpers.QUIET)
    save_tuned(col_copy, {"lam": 0.7, "passage_alpha": 0.3, "doc_stage": "hybrid-max"}, {"questions": "test"})
    build(col_copy, BuildOptions(progress=False, bm25=False, backend=helpers.SHARED_BACKEND), log=helpers.QUIET)
    assert Manifest.read(live_build_dir(col_copy)).defaults == {"dhr": {"lam": 0.7}}
    with open_collection(col_copy) as col:
        res = get_retriever("dhr", col).search("volcano lava", k=3)
        assert len(res) == 3 and res.params["passage_alpha"] == 0.0 and res.params["lam"] == 0.7
