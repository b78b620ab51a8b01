"""Encoder backends: exported graphs give torch's vectors (int8: close ones), are made once, and are keyed apart."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import helpers
import numpy as np
import pytest

import hiera.backends as backends
from hiera.builds import open_collection
from hiera.cli import main
from hiera.encode import Encoder
from hiera.errors import HieraError
from hiera.index.build import BuildOptions, build
from hiera.index.publish import live_build_dir
from hiera.retrieve import get_retriever

pytest.importorskip("onnxruntime")

TEXTS = [
    "Volcanoes erupt lava when magma reaches the surface.",
    "Chess",
    "The Roman Empire was ruled by emperors; Augustus was the first of them, and Romulus Augustulus the last. " * 4,
    "Jazz began in New Orleans.",
]


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("backend-cache")


@pytest.fixture(scope="module")
def torch_vectors(cache: Path) -> np.ndarray:
    return Encoder(cache_dir=cache, use_cache=False, backend="torch").encode_document(TEXTS)


@pytest.mark.parametrize("backend", ["onnx", "openvino"])
def test_exported_graphs_give_torchs_vectors(backend: str, cache: Path, torch_vectors: np.ndarray) -> None:
    if backend == "openvino" and importlib.util.find_spec("openvino") is None:
        pytest.skip("openvino not installed")
    enc = Encoder(cache_dir=cache, use_cache=False, backend=backend)
    vecs = enc.encode_document(TEXTS)
    assert vecs.shape == torch_vectors.shape and vecs.dtype == np.float32
    assert np.allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-5)
    assert (vecs * torch_vectors).sum(axis=1).min() > 0.9999
    # a single query, as the search path asks for it, and the order of a batch kept
    q = enc.encode_query("where did jazz begin")
    assert q.shape == (enc.dim,)
    assert np.allclose(enc.encode_document(TEXTS[::-1]), vecs[::-1], atol=1e-5)


def test_int8_is_quantized_but_close(cache: Path, torch_vectors: np.ndarray) -> None:
    enc = Encoder(cache_dir=cache, use_cache=False, backend="onnx-int8")
    cos = (enc.encode_document(TEXTS) * torch_vectors).sum(axis=1)
    assert cos.min() > 0.95  # close: retrieval quality is bench/encode_speed.py's to judge
    assert cos.max() < 0.9999  # and really another model: the int8 graph ran, not the float one
    # queries go through the float graph: torch's query vectors, not the int8 documents' neighbours
    t = Encoder(cache_dir=cache, use_cache=False, backend="torch")
    qs = ["where did jazz begin", "who was the first Roman emperor"]
    assert (enc.encode_query(qs) * t.encode_query(qs)).sum(axis=1).min() > 0.9999
    assert enc.graph.query_path.name == "model-fused.onnx" != enc.graph.path.name
    sizes = {p.name: p.stat().st_size for p in enc.graph.path.parent.iterdir()}
    assert sizes["model-fused-int8.onnx"] < 0.7 * sizes["model-fused.onnx"]  # the layers' weights (not the embeddings)


def test_graph_calls_take_at_most_graph_batch_texts(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    enc = Encoder(cache_dir=cache, use_cache=False, backend="onnx", batch_size=32)
    whole = enc.encode_document(TEXTS)
    monkeypatch.setattr(backends, "GRAPH_BATCH", 3)
    run = enc.graph._runner(enc.graph.path)
    rows: list[int] = []

    def counting(feed: dict[str, np.ndarray]) -> np.ndarray:
        rows.append(len(next(iter(feed.values()))))
        return run(feed)

    monkeypatch.setitem(enc.graph._runs, enc.graph.path, counting)
    assert np.allclose(enc.encode_document(TEXTS), whole, atol=1e-5)  # the order kept across calls
    assert rows == [3, 1]


def test_graphs_are_exported_once_and_published_whole(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    Encoder(cache_dir=cache, use_cache=False, backend="onnx")  # made by now (or here)
    calls: list[str] = []
    monkeypatch.setattr(backends, "_export", lambda *a: calls.append("export"))
    monkeypatch.setattr(backends, "_fuse", lambda *a: calls.append("fuse"))
    enc = Encoder(cache_dir=cache, use_cache=False, backend="onnx")
    assert calls == []
    assert not [p for p in enc.graph.path.parent.iterdir() if p.name.endswith(".tmp")]


def test_a_failed_export_leaves_nothing_behind(tmp_path: Path) -> None:
    def fail(tmp: Path) -> None:
        tmp.write_bytes(b"half a graph")
        raise RuntimeError("killed")

    with pytest.raises(RuntimeError):
        backends._atomic(tmp_path / "g" / "model.onnx", fail)
    assert list((tmp_path / "g").iterdir()) == []


def test_the_backend_is_part_of_the_cache_key_and_the_model_record(cache: Path) -> None:
    t = Encoder(cache_dir=cache, use_cache=False, backend="torch")
    o = Encoder(cache_dir=cache, use_cache=False, backend="onnx")
    assert t.cache_key == t.fingerprint  # torch's caches from before backends existed stay valid
    assert o.fingerprint == t.fingerprint and o.cache_key != t.cache_key
    assert (t.info.backend, o.info.backend) == ("torch", "onnx")


def test_auto_is_the_fastest_installed_backend_within_the_quality_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    have = {"openvino", "onnx", "onnx-int8"}
    monkeypatch.setattr(backends, "installed", lambda b: b == "torch" or b in have)
    assert backends.check_backend("auto") == "onnx-int8"
    have.discard("onnx-int8")  # ONNX Runtime without the onnx package, which quantizing needs
    assert backends.check_backend("auto") == "onnx"
    have.discard("onnx")
    assert backends.check_backend("AUTO") == "openvino"
    have.clear()
    assert backends.check_backend("auto") == "torch"


def test_unknown_or_missing_backends_are_one_line_errors(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(HieraError, match="unknown encoder backend 'tensorrt'; choose one of: auto, torch, onnx"):
        Encoder(cache_dir=cache, backend="tensorrt")
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "openvino" else real(name, *a))
    with pytest.raises(HieraError, match=r"needs openvino \(pip install 'hiera\[fast\]'\)") as e:
        Encoder(cache_dir=cache, backend="openvino")
    assert "\n" not in str(e.value)


def _faiss_rows(index) -> np.ndarray:  # noqa: ANN001 - a FAISS index
    return np.vstack([index.reconstruct(i) for i in range(index.ntotal)])


def test_a_build_records_its_backend_and_searches_use_it(col_copy: Path, cache: Path) -> None:
    build(col_copy, BuildOptions(progress=False, backend="torch"), log=helpers.QUIET)
    torch_col = open_collection(col_copy)
    torch_hits = get_retriever("dense", torch_col).search(helpers.TOPIC_QUERIES["volcanoes"], k=3)
    torch_vecs = np.array(torch_col.passage_vectors)  # read now: the rebuild removes the old build

    build(col_copy, BuildOptions(progress=False, backend="onnx-int8"), log=helpers.QUIET)
    m = json.loads((live_build_dir(col_copy) / "manifest.json").read_text())
    assert {m["models"][level]["backend"] for level in ("passage", "doc")} == {"onnx-int8"}

    col = open_collection(col_copy)
    assert col.passage_encoder.backend == "onnx-int8"  # the query side follows the build
    # re-encoded, not copied from the torch build, and FAISS holds the new vectors, not the old index
    assert not np.array_equal(np.asarray(col.passage_vectors), torch_vecs)
    assert np.allclose(_faiss_rows(col.passage_faiss), np.asarray(col.passage_vectors, dtype=np.float32), atol=1e-6)
    assert np.allclose(_faiss_rows(col.doc_faiss), np.asarray(col.doc_vectors, dtype=np.float32), atol=1e-6)
    hits = get_retriever("dense", col).search(helpers.TOPIC_QUERIES["volcanoes"], k=3)
    assert hits.hits[0].doc_id == torch_hits.hits[0].doc_id
    assert hits.hits[0].score != pytest.approx(torch_hits.hits[0].score, abs=1e-6)

    # a search may run the query encoder on another backend
    assert open_collection(col_copy, backend="torch").passage_encoder.backend == "torch"


def test_cli_build_and_search_take_a_backend(col_copy: Path, capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(SystemExit) as e:
        main(["build", str(col_copy), "--backend", "tensorrt", "-q"])
    assert e.value.code == 2
    assert main(["build", str(col_copy), "--backend", "onnx", "-q"]) == 0
    capsys.readouterr()
    assert main(["search", str(col_copy), helpers.TOPIC_QUERIES["volcanoes"], "-r", "dense", "--backend", "torch",
                 "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["hits"]


# -- searching without sentence-transformers ------------------------------------------------------------------
AWKWARD = [*TEXTS, "", "  padded   with spaces  ", "Ünïcödé — naïve café 東京 🚀", "word " * 400, "a\tb\nc", "x"]


def test_the_fast_tokenizer_gives_sentence_transformers_token_tensors(cache: Path) -> None:
    enc = Encoder(cache_dir=cache, use_cache=False, backend="torch")
    fast = backends.FastTokenizer.load(enc.path)
    assert fast is not None and fast.dim == enc.dim and fast.max_seq_length == enc.max_seq_length
    for batch in (AWKWARD, AWKWARD[:1], AWKWARD[::-1]):
        ours, theirs = fast(batch), enc.model.preprocess(batch)
        for name in ("input_ids", "attention_mask", "token_type_ids"):
            assert np.array_equal(ours[name], theirs[name].numpy()), name
    assert fast(["word " * 400])["input_ids"].shape == (1, enc.max_seq_length)  # truncated at the model's length


def test_a_model_it_cannot_reproduce_is_left_to_sentence_transformers(cache: Path, tmp_path: Path) -> None:
    import shutil

    enc = Encoder(cache_dir=cache, use_cache=False, backend="torch")
    for name, edit in [
        ("sentence_bert_config.json", lambda c: {**c, "do_lower_case": True}),
        ("config_sentence_transformers.json", lambda c: {**c, "prompts": {"query": "query: "}}),
        ("modules.json", lambda c: [*c, {"idx": 3, "name": "3", "path": "3_Dense",
                                         "type": "sentence_transformers.models.Dense"}]),
    ]:
        model = tmp_path / name
        shutil.copytree(enc.path, model)
        (model / name).write_text(json.dumps(edit(json.loads((model / name).read_text()))))
        assert backends.FastTokenizer.load(model) is None, name


def test_searching_on_exported_graphs_never_loads_sentence_transformers(col_copy: Path, cache: Path) -> None:
    """A cold search imports neither sentence-transformers nor torch: seconds of a one-off CLI call (bench/cold_cli.py)."""
    import subprocess
    import sys

    build(col_copy, BuildOptions(progress=False, backend="onnx"), log=helpers.QUIET)
    want = get_retriever("dense", open_collection(col_copy)).search("where did jazz begin", k=3)
    code = (
        "import json, sys\n"
        "from hiera.builds import open_collection\n"
        "from hiera.retrieve import get_retriever\n"
        f"res = get_retriever('dense', open_collection({str(col_copy)!r})).search('where did jazz begin', k=3)\n"
        "print(json.dumps({'ids': [h.passage_id for h in res], 'scores': [h.score for h in res],\n"
        "                  'loaded': [m for m in ('sentence_transformers', 'torch') if m in sys.modules]}))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    got = json.loads(done.stdout.strip().splitlines()[-1])
    assert got["loaded"] == []
    assert got["ids"] == [h.passage_id for h in want]
    assert np.allclose(got["scores"], [h.score for h in want], atol=1e-5)
