"""Exact search with torch: the same hits as a Flat FAISS index, and an exact search over an HNSW build."""

from __future__ import annotations

from pathlib import Path

import helpers
import numpy as np
import pytest

from hiera.builds import open_collection
from hiera.collection import Collection
from hiera.errors import BadInputError
from hiera.index.build import BuildOptions, build
from hiera.index.dense import build_faiss, faiss_search
from hiera.index.exact import Placement, TorchExactIndex, resolve_placement
from hiera.models import cuda_available
from hiera.retrieve import get_retriever

QUERIES = [q for _, q in list(helpers.TOPIC_QUERIES.items())[:6]]


def _unit(rng: np.random.Generator, n: int, d: int) -> np.ndarray:
    x = rng.standard_normal((n, d)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def test_torch_exact_index_equals_faiss_flat() -> None:
    rng = np.random.default_rng(0)
    vecs, queries = _unit(rng, 3000, 48), _unit(rng, 300, 48)  # 300 queries: more than one query block
    ref_ids, ref_sc = faiss_search(build_faiss(vecs, "Flat"), queries, 25)
    index = TorchExactIndex(vecs, "cpu")
    ids, sc = faiss_search(index, queries, 25)
    assert ids.shape == (300, 25) and ids.dtype == np.int64 and sc.dtype == np.float32
    assert np.array_equal(ids, ref_ids)
    assert np.allclose(sc, ref_sc, atol=1e-5)
    assert np.allclose(index.reconstruct(7), vecs[7])
    assert faiss_search(index, queries[:1], 10_000)[0].shape == (1, 3000)  # k capped at the collection


def test_placement_resolves_with_one_line_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    import hiera.models

    monkeypatch.setattr(hiera.models, "cuda_available", lambda: False)
    assert resolve_placement() == Placement("cpu", "faiss")
    assert resolve_placement("cpu", "exact") == Placement("cpu", "exact")
    with pytest.raises(BadInputError, match="torch sees no CUDA device here"):
        resolve_placement("cuda")
    with pytest.raises(BadInputError, match="unknown device 'tpu'"):
        resolve_placement("tpu")
    with pytest.raises(BadInputError, match="--dense-search faiss"):  # the old spelling gets the new names
        resolve_placement("faiss")
    with pytest.raises(BadInputError, match="unknown mode 'hnsw'"):
        resolve_placement("cpu", "hnsw")
    monkeypatch.setattr(hiera.models, "cuda_available", lambda: True)
    assert resolve_placement() == Placement("cuda", "exact")
    assert resolve_placement("auto", "faiss") == Placement("cuda", "faiss")


def _hits(col: Collection, name: str) -> list[list[tuple[str, float]]]:
    res = get_retriever(name, col).batch_search(QUERIES, k=8)
    return [[(h.passage_id, round(h.score, 4)) for h in r.hits] for r in res]


def test_collection_on_the_torch_device_gives_the_faiss_results(shared_root: Path) -> None:
    col = open_collection(shared_root, device="cpu", dense_search="exact")
    assert col.placement == Placement("cpu", "exact") and isinstance(col.passage_faiss, TorchExactIndex)
    assert isinstance(col.doc_faiss, TorchExactIndex) and col.passage_backend == "torch"
    ref = open_collection(shared_root, device="cpu", dense_search="faiss")
    for name in ("dense", "dhr", "hybrid"):
        assert _hits(col, name) == _hits(ref, name), name


def test_an_hnsw_build_is_searched_exactly(shared_root: Path, tmp_path: Path) -> None:
    root = helpers.copy_collection(shared_root, tmp_path / "col")
    build(root, BuildOptions(progress=False, passage_factory="HNSW4", doc_factory="HNSW4", backend=helpers.SHARED_BACKEND),
          log=helpers.QUIET)
    exact_col = open_collection(root, device="cpu", dense_search="exact")
    assert isinstance(exact_col.passage_faiss, TorchExactIndex) and isinstance(exact_col.doc_faiss, TorchExactIndex)
    assert "HNSW" in type(open_collection(root, dense_search="faiss").passage_faiss).__name__
    flat = open_collection(shared_root, dense_search="faiss")
    assert _hits(exact_col, "dense") == _hits(flat, "dense")


def test_float16_scan_is_rescored_to_the_float32_results() -> None:
    """The GPU's arithmetic (float16 scan, float32 rescoring of its top 2k + 64), run on a CPU: FAISS's results."""
    rng = np.random.default_rng(1)
    vecs = _unit(rng, 4000, 32).astype(np.float16).astype(np.float32)  # what a build stores
    queries = _unit(rng, 40, 32)
    ref_ids, ref_sc = faiss_search(build_faiss(vecs, "Flat"), queries, 30)
    half = TorchExactIndex(vecs, "cpu", dtype="float16")
    ids, sc = faiss_search(half, queries, 30)
    assert np.array_equal(ids, ref_ids)
    assert np.allclose(sc, ref_sc, atol=1e-6)
    # without the rescoring, float16 products (3 significant digits) tie and reorder: the rescoring matters
    import torch

    raw = (torch.from_numpy(queries).half() @ half.matrix.T).float()
    assert not np.array_equal(torch.topk(raw, 30, dim=1).indices.numpy(), ref_ids)


def test_equal_scores_come_in_position_order() -> None:
    vecs = np.tile(np.eye(8, dtype=np.float32)[:1], (10, 1))  # ten identical vectors
    ids, _ = faiss_search(TorchExactIndex(vecs, "cpu"), np.eye(8, dtype=np.float32)[:1], 10)
    assert ids[0].tolist() == list(range(10))


@pytest.mark.skipif(not cuda_available(), reason="no CUDA device: the GPU path runs on a lent GPU machine only")
def test_cuda_exact_index_equals_the_cpu_one() -> None:
    rng = np.random.default_rng(2)
    vecs = _unit(rng, 20_000, 64).astype(np.float16).astype(np.float32)
    queries = _unit(rng, 64, 64)
    cpu_ids, cpu_sc = faiss_search(TorchExactIndex(vecs, "cpu"), queries, 50)
    gpu_ids, gpu_sc = faiss_search(TorchExactIndex(vecs, "cuda"), queries, 50)
    assert np.array_equal(gpu_ids, cpu_ids)
    assert np.allclose(gpu_sc, cpu_sc, atol=1e-5)
