"""Exact inner-product search with torch: on a GPU when there is one.

A GPU reads a float16 matrix at terabytes per second, so an exhaustive
search (one matrix product and a top-k) is exact *and* fast there: issue 20
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

:class:`DevicePassageStage` is DHR's passage stage on the same device: the
chosen documents' passage rows are gathered from the device-resident matrix
through the offset table, scored, fused with the document scores and cut to
the top ``k`` there, for a whole batch of queries at once, and one packed
array per batch comes back to the host (issue 32 measured the CPU gather at
2–4× the cost of the rest of a GPU search).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np

from hiera.errors import BadInputError
from hiera.models import cuda_available

DEVICES = ("auto", "faiss", "cuda", "cpu")
_QUERY_BATCH = 256  # queries per matrix product: bounds the (queries × vectors) score block
_RESCORE_FLOATS = 1 << 24  # float32 values of gathered rows rescored at once (a k of millions stays bounded)


def model_device(search_device: str) -> str:
    """Where models run for a search device: ``cuda`` → the GPU, ``faiss`` / ``cpu`` → the CPU, ``auto`` → ``auto``.

    One meaning of ``--device`` for every command that searches: it says where
    the indexes are searched *and* where the models (query encoders, reader,
    reranker) run; ``faiss`` is the CPU with the indexes as built.
    """
    return {"cuda": "cuda", "auto": "auto"}.get(search_device, "cpu")


def resolve_device(name: str) -> str:
    """``auto``: ``cuda`` when torch sees a GPU, else ``faiss`` (the indexes as built); a bad name is one line."""
    if name not in DEVICES:
        raise BadInputError(f"unknown search device {name!r}; choose one of: {', '.join(DEVICES)}")
    if name == "auto":
        return "cuda" if cuda_available() else "faiss"
    if name == "cuda" and not cuda_available():
        raise BadInputError("--device cuda: torch sees no CUDA device here; use auto, faiss or cpu")
    return name


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


@dataclass
class StageResult:
    """One query's top ``k`` of DHR's passage stage, as numpy arrays aligned with ``positions``."""

    positions: np.ndarray  # passage positions, best first
    scores: np.ndarray  # passage stage + λ · document score
    doc_index: np.ndarray  # index into the query's document list of each hit's document (its doc rank − 1)
    doc_score: np.ndarray  # that document's score
    passage: np.ndarray  # passage-stage score (dense, or α · BM25/best + (1 − α) · dense)
    passage_rank: np.ndarray  # its rank among all the query's candidates (1-based, stable)
    dense: np.ndarray
    dense_rank: np.ndarray
    bm25: np.ndarray | None
    bm25_rank: np.ndarray | None
    candidates: int


class DevicePassageStage:
    """DHR's passage stage on a torch device: gather, score, fuse and cut there, one transfer per batch.

    The arithmetic is :class:`hiera.retrieve.dhr.Candidates`' (dense cosine
    of the stored float16 row in float32; with ``passage_alpha`` > 0,
    ``α · BM25/best + (1 − α) · dense``; then ``+ λ · document score``; top
    ``k`` with ties by candidate order), so results equal the CPU path's; on
    a CPU device the same code runs, which is how the tests check it.
    """

    def __init__(self, index: TorchExactIndex, offsets: np.ndarray) -> None:
        import torch

        self._torch = torch
        self.index = index
        self.device = index.device
        self.offsets = torch.from_numpy(np.asarray(offsets, dtype=np.int64)).to(self.device)

    def candidates(self, docs: Any) -> tuple[Any, Any]:
        """``(passage positions, index into docs)`` of every passage of ``docs`` (a device tensor), grouped by document."""
        torch = self._torch
        starts, ends = self.offsets[docs], self.offsets[docs + 1]
        counts = ends - starts
        per_doc = torch.repeat_interleave(torch.arange(len(docs), device=self.device), counts)
        first = torch.cumsum(counts, 0) - counts  # where each document's block starts among the candidates
        pos = starts[per_doc] + torch.arange(len(per_doc), device=self.device) - first[per_doc]
        return pos, per_doc

    def run(
        self,
        queries: np.ndarray,
        docs: list[Any],
        doc_scores: list[Any],
        k: int,
        lam: float,
        passage_alpha: float = 0.0,
        bm25: list[np.ndarray] | None = None,
    ) -> list[StageResult]:
        """The top ``k`` passages of each query's documents (device tensors or numpy arrays, best first).

        ``bm25``: per query, the BM25 score of each candidate in the order of
        :meth:`candidates` (the hybrid passage stage; computed on the host,
        where BM25 lives).
        """
        torch = self._torch
        dev = self.device
        with torch.inference_mode():
            q = torch.from_numpy(np.ascontiguousarray(np.atleast_2d(queries), dtype=np.float32)).to(dev)
            per_query, lengths = [], []
            for b in range(len(docs)):
                d = torch.as_tensor(docs[b], device=dev).long()
                pos, per_doc = self.candidates(d)
                dense = self.index.matrix[pos].float() @ q[b]
                ds = torch.as_tensor(doc_scores[b], device=dev).float()
                per_query.append((pos, per_doc, dense, ds))
                lengths.append(len(pos))
            n = max(1, max(lengths, default=0))
            kk = min(int(k), n)
            packed = torch.full((len(docs), max(kk, 1), 10), float("nan"), dtype=torch.float64, device=dev)
            for b, (pos, per_doc, dense, ds) in enumerate(per_query):
                m = len(pos)
                if m == 0:
                    continue
                bm = None
                stage = dense
                if bm25 is not None and passage_alpha > 0:
                    bm = torch.as_tensor(np.asarray(bm25[b], dtype=np.float32), device=dev)
                    top = bm.max()
                    norm = torch.where(top > 0, bm / top, bm)
                    stage = passage_alpha * norm + (1.0 - passage_alpha) * dense
                final = stage + lam * ds[per_doc]
                sc, sel = best_first(final[None], torch.arange(m, device=dev)[None], min(kk, m))
                sc, sel = sc[0], sel[0]
                cols = [pos[sel].double(), sc.double(), per_doc[sel].double(), ds[per_doc[sel]].double(),
                        stage[sel].double(),
                        _ranks(stage, sel).double(), dense[sel].double(), _ranks(dense, sel).double()]
                if bm is not None:
                    cols += [bm[sel].double(), _ranks(bm, sel).double()]
                else:
                    cols += [torch.full_like(sc, float("nan"), dtype=torch.float64)] * 2
                packed[b, : len(sel)] = torch.stack(cols, dim=1)
            host = packed.cpu().numpy()  # the one transfer of the batch
        out = []
        for b, m in enumerate(lengths):
            rows = host[b, : min(kk, m)] if m else host[b, :0]
            has_bm = bm25 is not None and passage_alpha > 0
            out.append(StageResult(
                positions=rows[:, 0].astype(np.int64), scores=rows[:, 1].astype(np.float32),
                doc_index=rows[:, 2].astype(np.int64), doc_score=rows[:, 3].astype(np.float32),
                passage=rows[:, 4].astype(np.float32), passage_rank=rows[:, 5].astype(np.int64),
                dense=rows[:, 6].astype(np.float32), dense_rank=rows[:, 7].astype(np.int64),
                bm25=rows[:, 8].astype(np.float32) if has_bm else None,
                bm25_rank=rows[:, 9].astype(np.int64) if has_bm else None,
                candidates=m,
            ))
        return out


def _ranks(scores: Any, sel: Any) -> Any:
    """1-based stable rank of ``scores[sel]`` within ``scores`` (:func:`hiera.index.select.ranks_of` for a few)."""
    import torch

    s = scores[sel][:, None]
    idx = torch.arange(len(scores), device=scores.device)[None, :]
    ahead = (scores[None, :] > s) | ((scores[None, :] == s) & (idx < sel[:, None]))
    return ahead.sum(dim=1) + 1
