"""Dense index building in steps: float16 input, chunked adds and blockwise mean vectors equal the one-shot result."""

from __future__ import annotations

import numpy as np
import pytest

import hiera.index.dense as dense
from hiera.index.dense import build_faiss, faiss_search, mean_vectors


def _unit(n: int, d: int = 16, seed: int = 0) -> np.ndarray:
    v = np.random.default_rng(seed).standard_normal((n, d)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


@pytest.mark.parametrize("factory", ["Flat", "IVF4,Flat"])
def test_float16_input_added_in_small_steps_equals_one_float32_add(factory: str, monkeypatch: pytest.MonkeyPatch) -> None:
    vecs16 = _unit(300).astype(np.float16)
    queries = _unit(5, seed=1)
    whole = build_faiss(vecs16.astype(np.float32), factory)
    monkeypatch.setattr(dense, "ADD_ROWS", 7)  # 43 steps, the last one short
    stepped = build_faiss(vecs16, factory)
    assert stepped.ntotal == whole.ntotal == 300
    ids_a, sc_a = faiss_search(whole, queries, 10)
    ids_b, sc_b = faiss_search(stepped, queries, 10)
    np.testing.assert_array_equal(ids_a, ids_b)
    np.testing.assert_allclose(sc_a, sc_b, rtol=0, atol=1e-6)


def test_a_compressed_graph_built_from_float16_in_steps_finds_its_vectors(monkeypatch: pytest.MonkeyPatch) -> None:
    """HNSW over 8-bit codes (the large profile's compressed graph); its multi-threaded adds are not bit-reproducible."""
    vecs16 = _unit(500, d=32).astype(np.float16)
    monkeypatch.setattr(dense, "ADD_ROWS", 64)
    index = build_faiss(vecs16, "HNSW16_SQ8")
    ids, _ = faiss_search(index, vecs16.astype(np.float32), 1)
    assert index.ntotal == 500
    assert (ids[:, 0] == np.arange(500)).mean() >= 0.98


def test_blockwise_mean_vectors_equal_the_direct_sum_empty_documents_included() -> None:
    pvecs = _unit(40).astype(np.float16)
    counts = np.array([3, 0, 5, 1, 0, 0, 7, 2, 4, 0, 6, 12])  # empty documents inside and at block edges
    offsets = np.concatenate([[0], np.cumsum(counts)])
    got = mean_vectors(pvecs, offsets, block_docs=4)
    for d in range(len(counts)):
        rows = pvecs[offsets[d] : offsets[d + 1]].astype(np.float32)
        if len(rows) == 0:
            assert not got[d].any()
            continue
        want = rows.sum(axis=0)
        np.testing.assert_allclose(got[d], want / np.linalg.norm(want), atol=1e-6)
    np.testing.assert_allclose(mean_vectors(pvecs, offsets, block_docs=100), got, atol=1e-7)


def test_mean_vectors_of_a_collection_ending_in_empty_documents() -> None:
    pvecs = _unit(4).astype(np.float16)
    offsets = np.array([0, 4, 4, 4])
    got = mean_vectors(pvecs, offsets, block_docs=1)
    assert got[0].any() and not got[1].any() and not got[2].any()


def test_flat_indexes_are_mapped_and_graphs_read_into_memory(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A graph visited node by node through a mapping faults on every first visit: graphs are read, Flat mapped."""
    faiss = dense.faiss_module()
    calls: list[int] = []
    real = faiss.read_index

    def spy(path: str, flags: int = 0):  # type: ignore[no-untyped-def]
        calls.append(flags)
        return real(path, flags)

    monkeypatch.setattr(faiss, "read_index", spy)
    vecs = _unit(200)
    for factory, mapped in (("Flat", True), ("HNSW8", False), ("HNSW8_SQ8", False)):
        path = tmp_path / f"{factory}.faiss"
        dense.save_faiss(build_faiss(vecs, factory), path)
        calls.clear()
        index = dense.load_faiss(path)
        assert (calls[-1] == faiss.IO_FLAG_MMAP_IFC) is mapped, factory
        assert faiss_search(index, vecs[:3], 1)[0][:, 0].tolist() == [0, 1, 2]
        calls.clear()
        dense.load_faiss(path, mmap=False)
        assert calls == [0]
