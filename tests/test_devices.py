"""``--device``: one meaning everywhere, the CPU unchanged without a GPU, the CUDA paths' arithmetic checked on a CPU.

The GPU-only tests at the end run where torch sees a CUDA device (a lent GPU
machine) and skip with the reason elsewhere; every CUDA code path also runs
here on the CPU (float16 encoding, the streaming encoder, the exact index's
float16 scan, DHR's torch passage stage in tests/index/test_passage_stage.py).
"""

from __future__ import annotations

from pathlib import Path

import helpers
import numpy as np
import pytest

import hiera.models as models
from hiera.cli.main import main
from hiera.encode import INTERCHANGEABLE_COSINE, Encoder, pick_device, stream_encode, text_hash
from hiera.errors import BadInputError, HieraError
from hiera.models import cuda_available, resolve_device

TEXTS = helpers.ENCODE_TEXTS
GPU = pytest.mark.skipif(not cuda_available(), reason="no CUDA device: GPU tests run on a lent GPU machine only")


def test_auto_is_the_cpu_without_a_gpu_and_cuda_with_one(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(models, "cuda_available", lambda: False)
    assert resolve_device("auto") == "cpu" and resolve_device(None) == "cpu" and resolve_device("cpu") == "cpu"
    with pytest.raises(BadInputError, match="--device cuda: torch sees no CUDA device here"):
        resolve_device("cuda")
    with pytest.raises(BadInputError, match="unknown device 'tpu'"):
        resolve_device("tpu")
    # backends: auto keeps today's CPU choice; an exported backend named with auto stays on the CPU
    assert pick_device("torch", "auto") == ("torch", "cpu")
    assert pick_device("onnx-int8", None)[1] == "cpu"
    monkeypatch.setattr(models, "cuda_available", lambda: True)
    assert resolve_device("auto") == "cuda"
    assert pick_device("auto", "auto") == ("torch", "cuda")  # on a GPU the encoders run on torch
    assert pick_device("onnx-int8", "auto") == ("onnx-int8", "cpu")
    with pytest.raises(BadInputError, match="runs on the CPU; on --device cuda"):
        pick_device("onnx", "cuda")
    with pytest.raises(HieraError, match="unknown encoder backend"):
        pick_device("tensorrt", "auto")


def test_asking_for_cuda_imports_torch_only_where_a_driver_is() -> None:
    """Where no NVIDIA driver is there can be no CUDA device: a cold search must not pay seconds of torch to hear so."""
    import os
    import subprocess
    import sys

    code = "import sys\nfrom hiera.models import cuda_available\nprint(cuda_available(), 'torch' in sys.modules)\n"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    driver = sys.platform.startswith("linux") and any(
        os.path.exists(p) for p in ("/proc/driver/nvidia/version", "/dev/nvidiactl", "/dev/nvidia0", "/dev/dxg"))
    assert out[1] == str(driver or not sys.platform.startswith("linux"))
    assert out[0] == str(cuda_available())


@pytest.mark.parametrize("argv", [
    ["build", "{root}", "--device", "cuda"],
    ["search", "{root}", "volcano", "--device", "cuda"],
    ["train-reader", "{root}", "--questions", "q.json", "--format", "squad", "--out", "x", "--device", "cuda"],
])
def test_cuda_without_a_gpu_is_a_one_line_error(argv: list[str], shared_root: Path, capsys, monkeypatch) -> None:
    if cuda_available():
        pytest.skip("this machine has a GPU")
    monkeypatch.chdir(shared_root.parent)
    rc = main([a.replace("{root}", str(shared_root)) for a in argv])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and "torch sees no CUDA device" in err[0], err


@pytest.fixture(scope="module")
def cpu32(tmp_path_factory: pytest.TempPathFactory) -> Encoder:
    return Encoder(backend="torch", device="cpu", cache_dir=tmp_path_factory.mktemp("cache"))


def test_float16_vectors_are_interchangeable_with_float32_ones(cpu32: Encoder, tmp_path: Path) -> None:
    """The GPU's arithmetic (float16 weights, streaming batches) on a CPU: cosine ≥ 0.999 to the float32 vectors."""
    half = Encoder(backend="torch", device="cpu", precision="float16", batch_size=2, cache_dir=tmp_path)
    assert half.streams and not cpu32.streams
    assert half.cache_key == cpu32.cache_key  # one cache: a GPU vector serves a CPU build and back
    assert half.info.precision == "float16" and cpu32.info.to_dict()["device"] == "cpu"
    a, b = cpu32.encode_document(TEXTS), half.encode_document(TEXTS)
    cos = (a * b).sum(axis=1)
    assert cos.min() >= INTERCHANGEABLE_COSINE, cos
    assert not np.array_equal(a, b)  # float16 did run
    np.testing.assert_allclose(np.linalg.norm(b, axis=1), 1.0, atol=1e-5)
    # a float32 vector in the cache is served to the float16 encoder as is
    half.cache.put_many([(text_hash("cached text"), a[0])])
    np.testing.assert_array_equal(half.encode_document(["cached text"])[0], a[0])


def test_streaming_encoder_equals_sentence_transformers(cpu32: Encoder) -> None:
    """The GPU loop (prefetched tokenization, one batch landed behind) in float32 on a CPU: the model's own vectors."""
    ref = cpu32.model.encode(TEXTS, normalize_embeddings=True, batch_size=2)
    for batch, prefetch in ((2, 1), (3, 4), (64, 2)):
        got = stream_encode(cpu32.model, TEXTS, "", batch, "cpu", prefetch=prefetch)
        np.testing.assert_allclose(got, ref, atol=2e-6)
    assert stream_encode(cpu32.model, [], "", 4, "cpu").shape[0] == 0


def test_manifest_records_where_vectors_came_from(shared_root: Path) -> None:
    from hiera.index.manifest import Manifest
    from hiera.index.publish import live_build_dir

    m = Manifest.read(live_build_dir(shared_root))
    info = m.models["passage"]
    assert info["device"] in ("cpu", "cuda") and info["precision"] in ("float32", "float16")
    assert (info["device"] == "cuda") == (info["precision"] == "float16")


def test_the_placement_decides_what_runs_where(shared_root: Path) -> None:
    """Device and dense search are two choices: each one changes what the opened collection runs, and the result says so."""
    from hiera.builds import open_collection
    from hiera.index.exact import TorchExactIndex
    from hiera.retrieve import get_retriever

    seen = {}
    for search in ("faiss", "exact"):
        col = open_collection(shared_root, device="cpu", dense_search=search)
        exact = isinstance(col.passage_faiss, TorchExactIndex)
        assert exact == (search == "exact") and col.passage_backend == ("torch" if exact else "numpy")
        res = get_retriever("dhr", col, passage_alpha=0.0).search("volcano eruption", k=3)
        steps = {s.name: s.detail for s in res.trace}
        assert steps["answered-by"]["dense_search"] == search and steps["answered-by"]["device"] == "cpu"
        assert steps["passage-stage"]["backend"] == col.passage_backend
        seen[search] = [h.passage_id for h in res.hits]
    assert seen["faiss"] == seen["exact"]  # a Flat build: the two searches agree
    # a dense document stage searched exactly hands its documents to the passage stage as device tensors
    for stage in ("summary", "mean"):
        hits = {}
        for search in ("faiss", "exact"):
            col = open_collection(shared_root, device="cpu", dense_search=search)
            res = get_retriever("dhr", col, doc_stage=stage, passage_alpha=0.0).batch_search(
                ["volcano eruption", "jazz in New Orleans"], k=5)
            hits[search] = [[(h.passage_id, h.stages["doc"].rank) for h in r.hits] for r in res]
            assert all({s.name: s for s in r.trace}["doc-stage"].detail["documents"] > 0 for r in res)
        assert hits["faiss"] == hits["exact"], stage


@pytest.mark.parametrize("argv", [
    ["search", "{root}", "volcano", "--device", "faiss"],
    ["eval", "{root}", "--questions", "q.json", "--format", "squad", "--device", "faiss"],
])
def test_the_old_device_spelling_gets_the_new_names(argv: list[str], shared_root: Path, capsys) -> None:
    with pytest.raises(SystemExit) as e:
        main([a.replace("{root}", str(shared_root)) for a in argv])
    err = capsys.readouterr().err.strip().splitlines()
    assert e.value.code == 2 and "--dense-search faiss" in err[-1] and "'faiss' is not a device" in err[-1]


@GPU
def test_cuda_encoder_matches_the_cpu_vectors(cpu32: Encoder, tmp_path: Path) -> None:
    gpu = Encoder(backend="torch", device="cuda", cache_dir=tmp_path)
    assert gpu.device == "cuda" and gpu.precision == "float16" and gpu.batch_size == 1024
    cos = (cpu32.encode_document(TEXTS) * gpu.encode_document(TEXTS)).sum(axis=1)
    assert cos.min() >= INTERCHANGEABLE_COSINE, cos
    q = (cpu32.encode_query("what erupts?") * gpu.encode_query("what erupts?")).sum()
    assert q >= INTERCHANGEABLE_COSINE


@GPU
def test_cuda_collection_searches_like_faiss(shared_root: Path) -> None:
    from hiera.builds import open_collection
    from hiera.retrieve import get_retriever

    gpu = open_collection(shared_root, device="cuda")
    ref = open_collection(shared_root, device="cpu", dense_search="faiss")
    assert gpu.passage_encoder.device == "cuda" or gpu.models["passage"].get("backend") != "torch"
    for name in ("dense", "hybrid"):
        a = get_retriever(name, gpu).batch_search(["volcano eruption", "chess pieces"], k=5)
        b = get_retriever(name, ref).batch_search(["volcano eruption", "chess pieces"], k=5)
        assert [[h.passage_id for h in r.hits] for r in a] == [[h.passage_id for h in r.hits] for r in b]
