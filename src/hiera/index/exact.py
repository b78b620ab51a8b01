"""Exact inner-product search with torch: on a GPU when there is one.

A GPU reads a float16 matrix at terabytes per second, so an exhaustive
search (one matrix product and a top-k) is exact *and* fast there: we
measured 5.8 ms for one query over 21M × 384 vectors on an H100, 0.34 ms per
query in batches of 32, where the CPU needs an approximate (HNSW) document
index to be fast at all. FAISS's GPU build is not on PyPI for this stack
(``faiss-cpu`` only); torch is already a dependency.

:class:`TorchExactIndex` speaks the part of FAISS's index interface hiera uses
(``ntotal``, ``d``, ``search``, ``reconstruct``), built from the float16
vector matrix every dense build already stores, so every caller of
:func:`hiera.index.dense.faiss_search` works unchanged and a collection built
with HNSW or IVF indexes is searched exactly. On a CPU the same code runs in
float32 (the tests' path, and ``--device cpu``): it equals a Flat FAISS index.

On a GPU the scan reads float16 and its products come out in float16 (about
three significant digits), so the top ``2k + 64`` of the scan are rescored in
float32 (their stored rows times the float32 query, as a CPU computes them)
before the top ``k`` is taken, ties by position: the results are the CPU
exact path's, not a float16 approximation of them.

Where searches run is two separate choices, resolved once when a collection
is opened (:func:`resolve_placement`): the *device* (``cpu`` or ``cuda``:
where models run, and exact scans with them) and the *dense search* (``faiss``:
the FAISS indexes as built, approximate where they are; ``exact``: this
module's exhaustive scan on the device). DHR's passage stage follows the
same choice (:mod:`hiera.index.passage_stage`).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np

from hiera.errors import BadInputError
from hiera.models import DEVICES, resolve_device

DENSE_SEARCH = ("auto", "faiss", "exact")
_QUERY_BATCH = 256  # queries per matrix product: bounds the (queries × vectors) score block
_RESCORE_FLOATS = 1 << 24  # float32 values of gathered rows rescored at once (a k of millions stays bounded)


@dataclass(frozen=True)
class Placement:
    """Where a collection is searched: the device models and exact scans run on, and how dense indexes are searched."""

    device: str  # "cpu" | "cuda"
    dense_search: str  # "faiss" | "exact"

    def describe(self) -> str:
        """``exact on cuda``, ``faiss on cpu``: what a trace and /health report."""
        return f"{self.dense_search} on {self.device}"


def resolve_placement(device: str | None = "auto", dense_search: str | None = "auto") -> Placement:
    """Both choices resolved once: ``auto`` device → ``cuda`` when torch sees a GPU; ``auto`` search → ``exact`` on
    ``cuda`` (a GPU scans every vector faster than a CPU walks a graph), else ``faiss``. Bad names are one line."""
    dev = str(device or "auto").strip().lower()
    if dev in ("faiss",):
        raise BadInputError("--device faiss: the device is where models run (auto, cpu, cuda); the FAISS indexes "
                            "as built are --dense-search faiss (dense_search='faiss'), e.g. --device cpu "
                            "--dense-search faiss")
    if dev not in DEVICES:
        raise BadInputError(f"--device: unknown device {device!r}; choose one of: {', '.join(DEVICES)} "
                            "(how dense indexes are searched is --dense-search faiss|exact)")
    resolved = resolve_device(dev)
    mode = str(dense_search or "auto").strip().lower()
    if mode not in DENSE_SEARCH:
        raise BadInputError(f"--dense-search: unknown mode {dense_search!r}; choose one of: {', '.join(DENSE_SEARCH)}")
    if mode == "auto":
        mode = "exact" if resolved == "cuda" else "faiss"
    return Placement(resolved, mode)


class TorchExactIndex:
    """Every vector scored against every query on ``device``, best first."""

    def __init__(self, matrix: np.ndarray, device: str = "cpu", dtype: str | None = None) -> None:
        """``dtype``: ``float16`` on a GPU (half the bytes to read), ``float32`` on a CPU, where float16 matrix
        products are slow; ``float16`` on a CPU runs the GPU's arithmetic there (the tests do)."""
        import torch

        self._torch = torch
        self.ntotal, self.d = int(matrix.shape[0]), int(matrix.shape[1])
        self.device = device
        self.dtype = getattr(torch, dtype) if dtype else (torch.float16 if device == "cuda" else torch.float32)
        with warnings.catch_warnings():
            # a read-only memory map: torch warns that the tensor must not be written, and it never is
            # (``to`` copies it to the device, or into float32)
            warnings.simplefilter("ignore", UserWarning)
            self.matrix = torch.from_numpy(np.ascontiguousarray(matrix)).to(device=device, dtype=self.dtype)

    @classmethod
    def from_tensor(cls, matrix: Any) -> TorchExactIndex:
        """An index over a matrix already on its device (``bench.gpu`` makes 21M vectors on the GPU, not in host RAM)."""
        import torch

        index = cls.__new__(cls)
        index._torch = torch
        index.ntotal, index.d = int(matrix.shape[0]), int(matrix.shape[1])
        index.device, index.dtype, index.matrix = matrix.device.type, matrix.dtype, matrix
        return index

    def search(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """FAISS's ``(scores, ids)``: float32 and int64 arrays of shape (n_queries, k), best first."""
        torch = self._torch
        q = np.ascontiguousarray(np.atleast_2d(queries), dtype=np.float32)
        scores, ids = [], []
        with torch.inference_mode():
            for start in range(0, len(q), _QUERY_BATCH):
                x = torch.from_numpy(q[start : start + _QUERY_BATCH]).to(self.device)
                s, i = self.top(x, k)
                scores.append(s.cpu().numpy())
                ids.append(i.cpu().numpy())
        return np.concatenate(scores), np.concatenate(ids)

    def top(self, x: Any, k: int) -> tuple[Any, Any]:
        """The ``k`` best rows for each float32 query row of ``x`` (on the device): float32 scores, int64 ids.

        Stays on the device (no host synchronization), so DHR's document stage
        can feed its passage stage there. Equal scores come in position order
        (which of several tied at the cut is kept is the scan's choice, as in
        FAISS); in float16 the scan's top ``2k + 64`` are rescored in float32
        first (the module's docstring).
        """
        torch = self._torch
        k = max(1, min(int(k), self.ntotal))
        x = x.to(device=self.device, dtype=torch.float32)
        low = self.dtype != torch.float32
        depth = min(self.ntotal, 2 * k + 64) if low else k
        s, i = torch.topk(x.to(self.dtype) @ self.matrix.T, depth, dim=1, sorted=False)
        if low:
            s = torch.empty(i.shape, dtype=torch.float32, device=i.device)
            step = max(256, _RESCORE_FLOATS // (len(x) * self.d))  # gathered rows in float32 stay ≤ 64 MB
            for c in range(0, depth, step):
                s[:, c : c + step] = torch.einsum("bkd,bd->bk", self.matrix[i[:, c : c + step]].float(), x)
        return best_first(s.float(), i, k)

    def reconstruct(self, i: int) -> np.ndarray:
        return self.matrix[int(i)].float().cpu().numpy()


def best_first(scores: Any, ids: Any, k: int) -> tuple[Any, Any]:
    """Each row's ``k`` best ``(scores, ids)``, best first, equal scores by ascending id (torch tensors)."""
    import torch

    ids, perm = torch.sort(ids, dim=1, stable=True)
    scores = scores.gather(1, perm)
    scores, order = torch.sort(scores, dim=1, descending=True, stable=True)
    return scores[:, :k], ids.gather(1, order)[:, :k]
