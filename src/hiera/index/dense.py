"""Dense vectors: a float16 memory-mapped matrix plus a FAISS index over it.

Every index uses ``METRIC_INNER_PRODUCT`` on L2-normalized vectors, so every
score is a cosine and higher is better, whatever the factory string (Flat,
HNSW32, IVF…,PQ…). The original DHR code added L2 distances to similarities;
we never see a distance.

The float16 matrix (not FAISS) is what DHR's passage stage reads: it gathers
the candidate documents' passage rows through the offset table and scores them
with one matrix product.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path
from typing import Any

import numpy as np

from hiera.errors import BadInputError
from hiera.io import load_npy, write_atomic


@functools.cache
def faiss_module():
    """Import FAISS with the settings measured to be right on small CPUs.

    The settings are process-wide, so they are applied once, on first use;
    FAISS's thread count is left to ``OMP_NUM_THREADS`` (all cores when unset).
    """
    import faiss

    # Batched searches skip BLAS below this many (query × vector) products:
    # without lowering it a flat batch of 100 runs ~10x slower.
    faiss.cvar.distance_compute_blas_threshold = 20
    return faiss


def set_threads(n: int | None) -> None:
    """Override ``OMP_NUM_THREADS`` for FAISS, process-wide (benchmarks pin it); None or 0 leaves it."""
    if n:
        faiss_module().omp_set_num_threads(n)


_FACTORY_OK = re.compile(r"^[A-Za-z0-9_,.]+$")


ADD_ROWS = 65_536  # vectors converted to float32 and added per step: a float16 matrix is never copied whole

# The candidate list each new HNSW node searches for its links (FAISS's default is 40, hnswlib's 200). On a million
# real-text passages (bench.filters_recall) a graph built with 40 found 0.85 of the exact top 20 at efSearch 128 and
# 0.955 even at 1024; built with 200 it finds 0.96 at 128, at the same search cost, for about 4x the build time.
# FAISS stores it in the index, so rows appended later (hiera add) are linked the same way.
HNSW_EF_CONSTRUCTION = 200


def build_faiss(vectors: np.ndarray, factory: str = "Flat", seed: int = 0):
    """A FAISS inner-product index over ``vectors`` (normalized; float32 or the float16 the matrices store).

    Vectors go in ``ADD_ROWS`` at a time, so a build holds the (float16)
    matrix and the index, never a float32 copy of all of it: at 5M passages
    that copy alone would be 7.7 GB.
    """
    faiss = faiss_module()
    if not _FACTORY_OK.match(factory):
        raise BadInputError(f"invalid FAISS factory string {factory!r}")
    n, d = vectors.shape
    try:
        index = faiss.index_factory(d, factory, faiss.METRIC_INNER_PRODUCT)
    except RuntimeError as e:
        raise BadInputError(f"FAISS cannot build {factory!r}: {str(e).splitlines()[0]}") from None
    if (graph := hnsw_graph(index)) is not None:
        graph.efConstruction = HNSW_EF_CONSTRUCTION
    if not index.is_trained:
        if n == 0:
            raise BadInputError(f"{factory!r} needs training vectors and the collection is empty")
        rng = np.random.default_rng(seed)
        pick = rng.choice(n, size=min(n, 200_000), replace=False)  # in drawn order: k-means sees what it always saw
        index.train(np.ascontiguousarray(vectors[pick], dtype=np.float32))
    add_rows(index, vectors)
    set_search_params(index)
    return index


def add_rows(index, vectors: np.ndarray) -> None:
    """Append ``vectors`` to ``index`` in float32 steps of ``ADD_ROWS``."""
    for start in range(0, len(vectors), ADD_ROWS):
        index.add(np.ascontiguousarray(vectors[start : start + ADD_ROWS], dtype=np.float32))


def hnsw_graph(index) -> Any:
    """The HNSW graph of ``index`` (``HNSW32``, ``HNSW32_SQ8``…), None for any other kind."""
    return getattr(faiss_module().downcast_index(index), "hnsw", None)


def set_search_params(index, ef_search: int = 128, nprobe: int = 32) -> None:
    """Sensible search-time knobs (HNSW efSearch, IVF nprobe) after load/build."""
    faiss = faiss_module()
    if (graph := hnsw_graph(index)) is not None:
        graph.efSearch = max(graph.efSearch, ef_search)
    try:
        ivf = faiss.extract_index_ivf(index)
        ivf.nprobe = min(nprobe, ivf.nlist)
    except (RuntimeError, AttributeError):
        pass


def save_faiss(index, path: Path) -> None:
    faiss = faiss_module()
    write_atomic(path, lambda tmp: faiss.write_index(index, str(tmp)))


def load_faiss(path: Path, mmap: bool = True):
    """A FAISS index from ``path``: Flat indexes memory-mapped, graphs read into memory.

    A Flat scan reads its file in order, so mapping it costs nothing and the
    page cache serves every process. A graph search jumps to a few thousand
    nodes per query; mapped, every node a process visits for the first time
    is a page fault, and a fresh process answered its first queries at 5M
    passages in 44 ms p50 against 18 ms once its pages were mapped
    (``bench/scale_real.py --synthetic``). Read, the graph costs its size
    in RSS once (≈ 3.3 GB for 5M passages on 8-bit codes) and no faults.
    Only ``IO_FLAG_MMAP_IFC`` maps (Flat and HNSW alike).
    """
    faiss = faiss_module()
    if mmap:
        try:
            index = faiss.read_index(str(path), faiss.IO_FLAG_MMAP_IFC)
        except RuntimeError:
            index = None
        if index is not None and hnsw_graph(index) is None:
            set_search_params(index)
            return index
    index = faiss.read_index(str(path))
    set_search_params(index)
    return index


def faiss_search(index, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """``(positions, scores)`` arrays of shape (n_queries, k); -1 marks no result."""
    q = np.ascontiguousarray(np.atleast_2d(queries), dtype=np.float32)
    k = max(1, min(k, index.ntotal))
    scores, ids = index.search(q, k)
    return ids, scores


def save_matrix(path: Path, vectors: np.ndarray, dtype=np.float16, chunk_rows: int = 65536) -> None:
    """Write ``vectors`` as a ``.npy`` of ``dtype``, in chunks, then rename it into place.

    Plain writes, not a memory map: on a full disk a write through a memory
    map kills the process with SIGBUS, where ``write`` fails with ENOSPC,
    which the build reports in one line.
    """
    header = {"descr": np.lib.format.dtype_to_descr(np.dtype(dtype)), "fortran_order": False, "shape": vectors.shape}

    def write(tmp: Path) -> None:
        with open(tmp, "wb") as fh:
            np.lib.format.write_array_header_1_0(fh, header)
            for start in range(0, len(vectors), chunk_rows):
                fh.write(np.ascontiguousarray(vectors[start : start + chunk_rows], dtype=dtype).tobytes())

    write_atomic(path, write)


def load_matrix(path: Path, mmap: bool = True) -> np.ndarray:
    return load_npy(path, mmap)


def mean_vectors(pvecs: np.ndarray, offsets: np.ndarray, block_docs: int = 50_000) -> np.ndarray:
    """Normalized per-document sum of passage vectors (zero for a document without passages).

    Summed ``block_docs`` documents at a time, so that a float16 matrix is
    converted to float32 a block at a time, not whole.
    """
    n_docs = len(offsets) - 1
    out = np.zeros((n_docs, pvecs.shape[1]), dtype=np.float32)
    for a in range(0, n_docs, block_docs):
        b = min(a + block_docs, n_docs)
        lo, hi = int(offsets[a]), int(offsets[b])
        if hi == lo:
            continue
        block = np.asarray(pvecs[lo:hi], dtype=np.float32)
        counts = np.diff(offsets[a : b + 1])
        # reduceat sums each [start, next start) block; an empty block yields the
        # row at its start instead of zero, so those are zeroed afterwards.
        starts = (offsets[a:b] - lo).clip(max=len(block) - 1)
        sums = np.add.reduceat(block, starts, axis=0)
        sums[counts == 0] = 0.0
        out[a:b] = sums
    norms = np.linalg.norm(out, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    out /= norms
    return out
