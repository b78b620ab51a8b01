"""DHR's passage stage: every passage of each query's chosen documents scored, fused and cut, a batch at a time.

One primitive with two backends, chosen when a collection is opened:

* :class:`HostPassageStage` (numpy): the candidates come from the offset
  table on the host, a *scorer* gives their dense and BM25 scores (a local
  build's float16 matrix and BM25 index, or a sharded build's shards in one
  round trip per batch), and :func:`select` fuses and cuts each query;
* :class:`TorchPassageStage` (torch, on ``cpu`` or ``cuda``): the offset
  table and the passage matrix live on the device, and the whole batch is
  gathered, scored, fused and cut there with a fixed number of operations
  per *batch* (none per query) and one device-to-host transfer.

Both compute the same thing (:func:`hiera.fusion.passage_score`, then
``+ λ · document score``; the top ``k`` with ties by candidate order), so
their results agree to float32 rounding; tests/index/test_passage_stage.py
holds them and the sharded collection to one brute-force reference.

Candidates are the passages of the query's documents, grouped by document,
documents best first, each document's passages in order. A filtered search
(``allowed``: an :class:`~hiera.query.Allowed`) keeps only the allowed
passages among them: dropped on the host before they are scored, masked out
of the grid on the device; their ranks and counts are among the allowed ones.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from hiera.fusion import dhr_score, passage_score
from hiera.index.select import concat_ranges, ranks_of, topk
from hiera.query import Allowed


@dataclass(frozen=True)
class PassageSpec:
    """What the passage stage computes: ``λ``, the BM25 weight ``α``, and how many passages per query.

    ``k=None`` returns every candidate in candidate order, unsorted (``hiera
    tune`` re-fuses the same candidates for many ``λ`` and ``α``).
    ``α`` = 0 scores passages densely only, ``α`` = 1 by BM25 only; ``with_dense``
    False skips the dense scores (hierarchical BM25, or a build without
    vectors), which needs ``α`` = 1.
    """

    lam: float
    passage_alpha: float = 0.0
    k: int | None = 10
    with_dense: bool = True

    def __post_init__(self) -> None:
        if not self.with_dense and self.passage_alpha < 1:
            raise ValueError("a passage stage without dense scores needs passage_alpha = 1")

    @property
    def dense(self) -> bool:
        return self.with_dense

    @property
    def bm25(self) -> bool:
        return self.passage_alpha > 0


class DeviceSearch(NamedTuple):
    """A document stage's exact search on a torch device, described but not yet run.

    The torch passage stage runs it inside the same CUDA graph as its own
    grid, so a single query costs one replay and one transfer instead of a
    launch per operation of each stage; anywhere else :meth:`run` runs it.
    """

    index: Any  # a hiera.index.exact.TorchExactIndex
    queries: Any  # (queries × d) float32 tensor on the index's device
    k: int

    def run(self) -> tuple[Any, Any]:
        """``(scores, ids)``: (queries × k) tensors on the device, best first."""
        return self.index.top(self.queries, self.k)


class DocLists(NamedTuple):
    """Each query's chosen documents, best first, and their document-stage scores.

    Lists of 1-D numpy arrays (one per query), or, from a document stage that
    ran on a torch device, two (queries × documents) tensors there: a dense
    index search's top ``k``, every row full (a position of -1 is read as no
    document, but the result's document count is the row's width). Or, from a
    document stage searched exactly on a torch device, that search not yet run
    (``search``; positions and scores None): :meth:`resolved` runs it.
    """

    positions: Any
    scores: Any
    search: DeviceSearch | None = None

    @classmethod
    def deferred(cls, search: DeviceSearch) -> DocLists:
        return cls(None, None, search)

    def resolved(self) -> DocLists:
        """The lists themselves: a deferred device search is run (its tensors stay on the device)."""
        if self.search is None:
            return self
        scores, ids = self.search.run()
        return DocLists(ids, scores)

    def on_host(self) -> DocLists:
        """The numpy form (one transfer when the lists are device tensors)."""
        if self.search is not None:
            return self.resolved().on_host()
        if isinstance(self.positions, list | tuple):
            return self
        pos, sc = self.positions.cpu().numpy(), self.scores.float().cpu().numpy()
        keep = [row >= 0 for row in pos]
        return DocLists([p[m].astype(np.int64) for p, m in zip(pos, keep, strict=True)],
                        [s[m].astype(np.float32) for s, m in zip(sc, keep, strict=True)])


@dataclass
class StageResult:
    """One query's passage-stage result, numpy arrays aligned with ``positions``."""

    positions: np.ndarray  # passage positions, best first (candidate order with k=None)
    scores: np.ndarray  # passage stage + λ · document score
    doc_index: np.ndarray  # index into the query's document list of each passage's document (its doc rank − 1)
    doc_score: np.ndarray  # that document's score
    passage: np.ndarray  # passage-stage score (dense, BM25/best, or α · BM25/best + (1 − α) · dense)
    passage_rank: np.ndarray  # its rank among all the query's candidates (1-based, stable)
    dense: np.ndarray | None
    dense_rank: np.ndarray | None
    bm25: np.ndarray | None  # raw BM25 score
    bm25_rank: np.ndarray | None
    candidates: int
    documents: int = 0  # the query's documents

    def stages(self) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        """Per-stage ``(scores, ranks)`` of the hits, as results report them: doc, passage, and its two parts when mixed."""
        out = {"doc": (self.doc_score, self.doc_index + 1), "passage": (self.passage, self.passage_rank)}
        if self.dense is not None and self.bm25 is not None:
            assert self.dense_rank is not None and self.bm25_rank is not None
            out["dense"] = (self.dense, self.dense_rank)
            out["bm25"] = (self.bm25, self.bm25_rank)
        return out


# -- the host backend --------------------------------------------------------------------------------------------
class Scores(NamedTuple):
    """Candidate scores from a scorer: per query, dense and BM25 (``None`` where not asked for)."""

    dense: list[np.ndarray] | None
    bm25: list[np.ndarray] | None


# texts, passage-encoder query vectors (n, d), each query's candidate positions, want dense, want BM25
Scorer = Callable[[Sequence[str], np.ndarray, Sequence[np.ndarray], bool, bool], Scores]


def candidates(offsets: np.ndarray, docs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(passage positions, index into docs)`` of every passage of ``docs``, grouped by document."""
    starts, ends = offsets[docs], offsets[docs + 1]
    return concat_ranges(starts, ends), np.repeat(np.arange(len(docs)), ends - starts)


def select(
    positions: np.ndarray, per_doc: np.ndarray, doc_scores: np.ndarray, dense: np.ndarray | None,
    bm25: np.ndarray | None, spec: PassageSpec,
) -> StageResult:
    """One query's fused scores, top ``k`` (ties by candidate order) and per-stage ranks."""
    stage = passage_score(dense, bm25, spec.passage_alpha)
    doc = np.asarray(doc_scores, dtype=np.float32)[per_doc]
    final = dhr_score(stage, doc, spec.lam)
    sel = np.arange(len(final)) if spec.k is None else topk(final, spec.k)[0]
    mixed = dense is not None and bm25 is not None
    return StageResult(
        positions=positions[sel], scores=final[sel].astype(np.float32), doc_index=per_doc[sel], doc_score=doc[sel],
        passage=stage[sel], passage_rank=ranks_of(stage)[sel],
        dense=dense[sel] if mixed else None, dense_rank=ranks_of(dense)[sel] if mixed else None,
        bm25=bm25[sel] if mixed else None, bm25_rank=ranks_of(bm25)[sel] if mixed else None,
        candidates=len(positions), documents=len(doc_scores),
    )


class HostPassageStage:
    """The passage stage on the host: candidates from the offset table, scores from ``scorer``, numpy fusion."""

    backend = "numpy"

    def __init__(self, offsets: np.ndarray, scorer: Scorer) -> None:
        self.offsets = np.asarray(offsets, dtype=np.int64)
        self.scorer = scorer

    def run(self, texts: Sequence[str], qp: np.ndarray | None, docs: DocLists, spec: PassageSpec,
            allowed: Allowed | None = None) -> list[StageResult]:
        docs = docs.on_host()
        cands = [candidates(self.offsets, np.asarray(d, dtype=np.int64)) for d in docs.positions]
        if allowed is not None:
            cands = [(pos[keep], per_doc[keep]) for pos, per_doc in cands for keep in (allowed.passages[pos],)]
        scores = self.scorer(texts, qp if qp is not None else np.zeros((len(texts), 0), np.float32),
                             [c[0] for c in cands], spec.dense, spec.bm25)
        return [
            select(pos, per_doc, docs.scores[i], scores.dense[i] if scores.dense is not None else None,
                   scores.bm25[i] if scores.bm25 is not None else None, spec)
            for i, (pos, per_doc) in enumerate(cands)
        ]


def matrix_scorer(matrix: Callable[[], Any], bm25_at: Callable[[str, np.ndarray], np.ndarray] | None) -> Scorer:
    """A scorer over one build: stored float16 rows · the query in float32, and the BM25 index's scores at positions.

    ``matrix`` is called when dense scores are asked for (a BM25-only build has none).
    """

    def score(texts: Sequence[str], qp: np.ndarray, positions: Sequence[np.ndarray], dense: bool, bm25: bool) -> Scores:
        rows = matrix() if dense else None
        d = [rows[p].astype(np.float32, copy=False) @ qp[i] for i, p in enumerate(positions)] if dense else None
        if bm25 and bm25_at is None:
            raise ValueError("the hybrid passage stage needs a BM25 index")
        b = [bm25_at(t, p) for t, p in zip(texts, positions, strict=True)] if bm25 else None
        return Scores(d, b)

    return score


# -- the torch backend -------------------------------------------------------------------------------------------
MAX_GRAPHS = 64  # CUDA graphs kept per stage (each holds its own memory); shapes past that run eagerly


def _pow2(n: int) -> int:
    return 1 << max(8, int(n - 1).bit_length())


class TorchPassageStage:
    """The passage stage on a torch device, batched by construction.

    The candidates of a batch are laid out in a (queries × capacity) grid
    computed on the device from the offset table (a cumulative sum and a
    batched ``searchsorted``), so no host synchronization is needed to know
    where each query's passages are. The capacity is a power of two learnt
    from the batches seen (starting at twice the mean candidates of
    ``top_docs`` documents): a batch whose candidates overflow it is told by
    the one transfer back and run again with enough room, so results are
    always exact and the padding stays near the candidates' total rather than
    ``top_docs`` × the longest document. Every operation is over the whole
    grid: their number does not grow with the batch (tests count them with
    ``torch.profiler``).

    On a GPU the grid's operations are captured once per shape (queries,
    documents, capacity, λ, α, k) in a CUDA graph and replayed: one launch
    instead of one per operation, so a single query does not wait on the host
    between tiny kernels. Handed a document search not yet run
    (:class:`DeviceSearch`), the stage captures that search in the same graph
    (:meth:`_fused`): the query vectors go in, the packed result comes out, and
    nothing in between waits on the host. A capture that fails leaves the
    stage eager (:attr:`graph_note` says why); ``graphs=False`` asks for eager.
    """

    backend = "torch"

    def __init__(self, matrix: Any, offsets: np.ndarray, device: str,
                 bm25_at: Callable[[str, np.ndarray], np.ndarray] | None = None, graphs: bool | None = None) -> None:
        import threading

        import torch

        self._torch = torch
        self.matrix = matrix  # (passages × d) tensor on ``device``: float16 on a GPU, float32 on a CPU
        self.device = device
        self.offsets_host = np.asarray(offsets, dtype=np.int64)
        # per document (first passage, passage count), and a last row (0, 0) that a padding index -1 reads
        spans = np.stack([self.offsets_host[:-1], np.diff(self.offsets_host)], axis=1)
        self.spans = torch.from_numpy(np.concatenate([spans, np.zeros((1, 2), np.int64)])).to(device)
        self.bm25_at = bm25_at
        n_docs = max(1, len(self.offsets_host) - 1)
        self.mean_len = float(self.offsets_host[-1]) / n_docs
        self._capacity: dict[int, int] = {}  # documents per query → candidates a row holds
        self._arange: dict[tuple[int, int, int], Any] = {}
        self.graphs = (device == "cuda") if graphs is None else bool(graphs) and device == "cuda"
        self.graph_note = ""
        self.fuse = True  # a deferred document search runs inside the stage's graph (:meth:`_fused`)
        self._graphs: dict[tuple, Any] = {}
        self._graph_lock = threading.Lock()

    def capacity(self, n_docs: int) -> int:
        return self._capacity.get(n_docs) or _pow2(int(2 * self.mean_len * max(1, n_docs)) + 1)

    def run(self, texts: Sequence[str], qp: Any, docs: DocLists, spec: PassageSpec,
            allowed: Allowed | None = None) -> list[StageResult]:
        torch = self._torch
        dev = self.device
        mask = None if allowed is None else allowed.tensor("passage", dev)
        with torch.inference_mode():
            if docs.search is not None:
                fused = self._fused(texts, qp, docs.search, spec, mask)
                if fused is not None:
                    return fused
                docs = docs.resolved()
            if isinstance(docs.positions, list | tuple):
                pos, sc, need = self._pad(docs)
                need = _pow2(need)  # a few shapes, not one per batch: padding stays below twice the candidates
            else:
                pos, sc, need = docs.positions.long(), docs.scores.float(), None
            nq, nd = pos.shape
            if nq == 0:
                return []
            if nd == 0:
                return [_empty(spec) for _ in range(nq)]
            q = torch.as_tensor(np.ascontiguousarray(qp, dtype=np.float32)).to(dev) if isinstance(qp, np.ndarray) else qp
            cap = need if need is not None else self.capacity(nd)
            bm25 = self._bm25(texts, docs, cap, allowed) if spec.bm25 else None
            while True:
                host = self._packed(q, pos, sc, bm25, cap, spec, mask)
                most = int(host[:, 0, _int_columns(spec) - 2].max(initial=0)) if host.shape[1] else 0  # candidates
                if most <= cap:
                    break
                cap = _pow2(most)  # overflow: room for this batch and the next ones like it
                self._capacity[nd] = max(cap, self._capacity.get(nd, 0))
                if bm25 is not None:
                    bm25 = self._bm25(texts, docs, cap, allowed)
        # a device list is a dense index search's top k: every row full
        documents = [len(d) for d in docs.positions] if isinstance(docs.positions, list | tuple) else [nd] * nq
        return [_unpack(host[b], spec, documents[b]) for b in range(nq)]

    def _packed(self, q: Any, docs: Any, doc_scores: Any, bm25: Any, cap: int, spec: PassageSpec,
                mask: Any = None) -> np.ndarray:
        """The packed grid on the host (the batch's one transfer back): replayed from a CUDA graph of its shape
        when graphs are on (captured at first use, at most :data:`MAX_GRAPHS`), else run eagerly (always with a
        filter's ``mask``)."""
        key = (None if q is None else tuple(q.shape), tuple(docs.shape), cap, spec)
        if not self.graphs or q is None or mask is not None or (
                key not in self._graphs and len(self._graphs) >= MAX_GRAPHS):
            return self._grid(q, docs, doc_scores, bm25, cap, spec, mask).cpu().numpy()
        inputs = [q.float(), docs, doc_scores] + ([bm25] if bm25 is not None else [])
        with self._graph_lock:  # one replay at a time: the graph's buffers are shared
            if key not in self._graphs:
                try:
                    self._graphs[key] = self._capture(inputs, cap, spec)
                except Exception as e:  # noqa: BLE001 - any capture failure: eager from now on, said once
                    self.graphs, self.graph_note = False, f"CUDA graphs off: {type(e).__name__}: {e}"
                    return self._grid(q, docs, doc_scores, bm25, cap, spec).cpu().numpy()
            graph, static, out = self._graphs[key]
            for dst, src in zip(static, inputs, strict=True):
                dst.copy_(src)
            graph.replay()
            return out.cpu().numpy()

    def _fused(self, texts: Sequence[str], qp: Any, search: DeviceSearch, spec: PassageSpec,
               mask: Any) -> list[StageResult] | None:
        """The document stage's device search and this stage's grid replayed from one CUDA graph, or None where
        that does not apply (graphs off, a filter, BM25 scores from the host, a failed capture): the caller then
        runs the search and the stage apart.

        One replay and one transfer a batch: the graph copies the query vectors in, searches the documents,
        builds and packs the grid. Its document lists stay in the graph's buffers, so a batch whose candidates
        overflow the capacity is rerun from them (without searching again) by the unfused path, which learns the
        larger capacity the next capture uses.
        """
        torch = self._torch
        if not (self.graphs and self.fuse) or mask is not None or spec.bm25 or qp is None or not spec.dense:
            return None
        nq, nd = int(search.queries.shape[0]), max(1, min(int(search.k), int(search.index.ntotal)))
        if nq == 0:
            return []
        qp = torch.as_tensor(np.ascontiguousarray(qp, dtype=np.float32)).to(self.device) \
            if isinstance(qp, np.ndarray) else qp
        cap = self.capacity(nd)
        key = ("fused", id(search.index), tuple(search.queries.shape), nd, tuple(qp.shape), cap, spec)
        inputs = [search.queries.float(), qp.float()]
        with self._graph_lock:
            if key not in self._graphs:
                if len(self._graphs) >= MAX_GRAPHS:
                    return None
                try:
                    self._graphs[key] = self._capture_fused(search.index, inputs, nd, cap, spec)
                except Exception as e:  # noqa: BLE001 - any capture failure: the stages apart from now on, said once
                    self.fuse, self.graph_note = False, f"fused document stage off: {type(e).__name__}: {e}"
                    return None
            graph, static, (out, dpos, dsc), host = self._graphs[key]
            for dst, src in zip(static, inputs, strict=True):
                dst.copy_(src)
            graph.replay()
            host.copy_(out, non_blocking=True)
            torch.cuda.current_stream().synchronize()
            rows = host.numpy().copy()
            most = int(rows[:, 0, _int_columns(spec) - 2].max(initial=0)) if rows.shape[1] else 0
            if most > cap:  # overflow: the documents found are kept, the stage reruns unfused with room
                docs = DocLists(dpos.clone(), dsc.clone())
            else:
                docs = None
        if docs is not None:
            return self.run(texts, qp, docs, spec)
        return [_unpack(rows[b], spec, nd) for b in range(nq)]

    def _graphed(self, body: Callable[[], Any]) -> tuple[Any, Any]:
        """``body`` captured in a CUDA graph, and what it returned (the graph's output buffers). It runs once on a
        side stream first, so its allocations, workspaces and slot grids exist before the capture."""
        torch = self._torch
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            body()
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            outs = body()
        return graph, outs

    def _capture_fused(self, index: Any, inputs: list[Any], nd: int, cap: int,
                       spec: PassageSpec) -> tuple[Any, list[Any], tuple[Any, Any, Any], Any]:
        static = [x.clone() for x in inputs]

        def body() -> tuple[Any, Any, Any]:
            dsc, dpos = index.top(static[0], nd)
            return self._grid(static[1], dpos, dsc, None, cap, spec), dpos, dsc

        graph, outs = self._graphed(body)
        host = self._torch.empty(outs[0].shape, dtype=outs[0].dtype, pin_memory=True)
        return graph, static, outs, host

    def _capture(self, inputs: list[Any], cap: int, spec: PassageSpec) -> tuple[Any, list[Any], Any]:
        static = [x.clone() for x in inputs]
        args = (*static[:3], static[3] if len(static) > 3 else None, cap, spec)
        graph, out = self._graphed(lambda: self._grid(*args))
        return graph, static, out

    def _slots(self, nq: int, cap: int, first: int = 0) -> Any:
        """A (queries × capacity) grid of slot numbers from ``first`` on the device, made once per shape."""
        key = (nq, cap, first)
        if key not in self._arange:
            self._arange[key] = self._torch.arange(first, cap + first, device=self.device).expand(nq, cap).contiguous()
        return self._arange[key]

    def _pad(self, docs: DocLists) -> tuple[Any, Any, int]:
        """Host lists → (queries × documents) tensors padded with -1 / 0, uploaded once; the exact capacity."""
        torch = self._torch
        nq = len(docs.positions)
        nd = max((len(d) for d in docs.positions), default=0)
        pos = np.full((nq, nd), -1, dtype=np.int64)
        sc = np.zeros((nq, nd), dtype=np.float32)
        need = 1
        for i, (d, s) in enumerate(zip(docs.positions, docs.scores, strict=True)):
            d = np.asarray(d, dtype=np.int64)
            pos[i, : len(d)], sc[i, : len(d)] = d, s
            need = max(need, int((self.offsets_host[d + 1] - self.offsets_host[d]).sum()))
        # one upload: the scores' float32 bits ride in the same int64 block as the positions
        both = torch.from_numpy(np.concatenate([pos, sc.view(np.int32).astype(np.int64)], axis=1)).to(self.device)
        return both[:, :nd], both[:, nd:].int().view(torch.float32), need

    def _bm25(self, texts: Sequence[str], docs: DocLists, cap: int, allowed: Allowed | None = None) -> Any:
        """BM25 of every candidate, computed on the host (where BM25 lives) in the grid's layout, uploaded once;
        0 for a passage a filter disallows (so the best BM25 score a row is divided by is an allowed one's)."""
        if self.bm25_at is None:
            raise ValueError("the hybrid passage stage needs a BM25 index")
        host = docs.on_host()
        grid = np.zeros((len(texts), cap), dtype=np.float32)
        for i, d in enumerate(host.positions):
            cand, _ = candidates(self.offsets_host, np.asarray(d, dtype=np.int64))
            if allowed is None:
                grid[i, : min(cap, len(cand))] = self.bm25_at(texts[i], cand)[:cap]
                continue
            keep = allowed.passages[cand]
            vals = np.zeros(len(cand), dtype=np.float32)
            vals[keep] = self.bm25_at(texts[i], cand[keep])
            grid[i, : min(cap, len(cand))] = vals[:cap]
        return self._torch.from_numpy(grid).to(self.device)

    def _grid(self, q: Any, docs: Any, doc_scores: Any, bm25: Any, cap: int, spec: PassageSpec,
              mask: Any = None) -> Any:
        """Gather, score, fuse, cut and pack a batch on the device: the same operations whatever its size.

        ``mask``: the allowed passages (a boolean tensor over all of them); the others leave the grid's valid
        slots, so they are neither returned nor ranked. Packed per query and hit (see :func:`_unpack`): the
        integer columns, then the float32 columns viewed as int64 pairs, each block gathered once.
        """
        torch = self._torch
        nq, nd = docs.shape
        span = self.spans[docs]  # (queries × documents × 2): first passage, passage count; padding (-1) → (0, 0)
        starts, counts = span[:, :, 0], span[:, :, 1]
        ends = counts.cumsum(1)  # where each document's passages end among the query's candidates
        totals = ends[:, -1:]
        slot = self._slots(nq, cap)
        which = torch.searchsorted(ends, slot, right=True).clamp_(max=nd - 1)  # the document of each slot
        valid = slot < totals
        pos = torch.where(valid, (starts - (ends - counts)).gather(1, which) + slot, 0)
        kept = totals
        if mask is not None:
            valid = valid & mask[pos]
            kept = valid.sum(1, keepdim=True)
        dense = None
        if spec.dense:
            rows = self.matrix[pos]  # (queries × capacity × d)
            dense = torch.bmm(rows.float(), q.float()[:, :, None])[:, :, 0]
        stage = passage_score(dense, bm25, spec.passage_alpha)
        doc = doc_scores.gather(1, which)
        final = torch.where(valid, dhr_score(stage, doc, spec.lam), float("-inf"))
        if spec.k is None:
            sel = slot
        else:
            sel = torch.sort(final, dim=1, descending=True, stable=True)[1][:, : min(int(spec.k), cap)]
        ones = self._slots(nq, cap, 1)
        ints = [pos, which, _ranks(torch.where(valid, stage, float("-inf")), ones)]
        floats = [final, doc, stage]
        if dense is not None and bm25 is not None:
            for part in (dense, bm25):
                ints.append(_ranks(torch.where(valid, part, float("-inf")), ones))
                floats.append(part)
        ints += [totals.expand(nq, cap), kept.expand(nq, cap)]  # per query: candidates, and those a filter kept
        if len(floats) % 2:
            floats.append(floats[-1])
        ints_sel = torch.stack(ints, dim=2).gather(1, sel[:, :, None].expand(-1, -1, len(ints)))
        floats_sel = torch.stack(floats, dim=2).gather(1, sel[:, :, None].expand(-1, -1, len(floats)))
        return torch.cat([ints_sel, floats_sel.float().contiguous().view(torch.int64)], dim=2)


def _ranks(scores: Any, ones: Any) -> Any:
    """1-based stable rank of every score within its row (``ranks_of`` for a grid): one stable sort, scattered.
    ``ones``: the grid's slot numbers + 1."""
    import torch

    order = torch.sort(scores, dim=1, descending=True, stable=True)[1]
    return torch.empty_like(order).scatter_(1, order, ones)


def _unpack(rows: np.ndarray, spec: PassageSpec, documents: int) -> StageResult:
    """One query's rows of the packed grid (see ``_grid``) → a :class:`StageResult`.

    Integer columns: position, document index, passage rank, [dense rank, BM25 rank when mixed], candidates,
    candidates kept by a filter; then the float32 columns final, document, passage, [dense, BM25] in pairs.
    """
    mixed = spec.dense and spec.bm25
    n_int = _int_columns(spec)
    kept = int(rows[0, n_int - 1]) if len(rows) else 0
    rows = rows[: min(len(rows), kept)]
    ints = rows[:, :n_int]
    floats = np.ascontiguousarray(rows[:, n_int:]).view(np.float32)
    return StageResult(
        positions=ints[:, 0].copy(), scores=floats[:, 0].copy(), doc_index=ints[:, 1].copy(),
        doc_score=floats[:, 1].copy(), passage=floats[:, 2].copy(), passage_rank=ints[:, 2].copy(),
        dense=floats[:, 3].copy() if mixed else None, dense_rank=ints[:, 3].copy() if mixed else None,
        bm25=floats[:, 4].copy() if mixed else None, bm25_rank=ints[:, 4].copy() if mixed else None,
        candidates=kept, documents=documents,
    )


def _int_columns(spec: PassageSpec) -> int:
    """How many integer columns ``_grid`` packs: position, document, passage rank, [dense and BM25 ranks],
    candidates, candidates kept."""
    return 7 if spec.dense and spec.bm25 else 5


def _empty(spec: PassageSpec) -> StageResult:
    floats = 5 if spec.dense and spec.bm25 else 3  # float32 columns, packed in int64 pairs
    return _unpack(np.zeros((0, _int_columns(spec) + (floats + 1) // 2), dtype=np.int64), spec, 0)
