"""Serial DHR's passage stage on the collection's torch search device, a batch of queries at a time.

When a collection is searched with torch (``--device cuda``, or ``cpu`` for
exact search on the CPU) it offers a :class:`hiera.index.exact.DevicePassageStage`
(``Collection.device_passage_stage``): the passage matrix and the offset
table live on the device. :class:`DeviceBatch` runs the document stage of
every query of a ``batch_search`` (on the device too when the stage is a
dense index search, ``summary`` or ``mean``, with the dense passage stage),
then the passage stage of all of them in one call with one transfer back.
The hits, scores, ranks and trace are those of :class:`hiera.retrieve.dhr.DhrRetriever`'s
CPU path (tests/retrieve/test_dhr_device.py compares them on a CPU).
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from hiera.index.exact import StageResult, TorchExactIndex
from hiera.index.select import concat_ranges
from hiera.score.docstage import stage

# Document stages that are one dense index search: on a torch device their top documents never leave it.
_DEVICE_DOC_STAGES = {"summary": ("doc_faiss", "qd"), "mean": ("doc_mean_faiss", "qp")}


class DeviceBatch:
    """The passage-stage results of one ``batch_search``, computed on first use for the batch's ``k``."""

    def __init__(self, col: Any, queries: list[str], contexts: list[dict[str, Any]], params: dict[str, Any]) -> None:
        self.col, self.queries, self.contexts, self.params = col, queries, contexts, params
        self.k: int | None = None
        self.results: list[StageResult] = []
        self.documents: list[int] = []
        self.doc_ms = self.passage_ms = 0.0

    def get(self, i: int, k: int) -> StageResult:
        if self.k != k:
            self._run(k)
        return self.results[i]

    def _device_docs(self, top_docs: int) -> tuple[list[Any], list[Any]] | None:
        """Every query's top documents as device tensors, when the stage is a dense search of a torch index."""
        name = self.params["doc_stage"]
        if name not in _DEVICE_DOC_STAGES or self.params["passage_alpha"] > 0:
            return None  # BM25 candidates are scored on the host: their documents are needed there anyway
        attr, vec = _DEVICE_DOC_STAGES[name]
        index = getattr(self.col, attr)
        if not isinstance(index, TorchExactIndex):
            return None
        import torch

        q = torch.from_numpy(np.stack([c[vec] for c in self.contexts]).astype(np.float32)).to(index.device)
        with torch.inference_mode():
            scores, ids = index.top(q, top_docs)
        return list(ids), list(scores)

    def _run(self, k: int) -> None:
        col, p = self.col, self.params
        top_docs = min(p["top_docs"], col.n_docs)
        alpha = p["passage_alpha"]
        t = time.perf_counter()
        found = self._device_docs(top_docs)
        bm25: list[np.ndarray] | None = None
        if found is None:
            docs, scores = [], []
            bm25 = [] if alpha > 0 else None  # as the CPU path: a build without BM25 refuses passage_alpha > 0
            for q, ctx in zip(self.queries, self.contexts, strict=True):
                dpos, dsc = stage(p["doc_stage"]).top(col, q, ctx, top_docs)
                docs.append(dpos)
                scores.append(dsc)
                if bm25 is not None:
                    offsets = col.doc_offsets
                    bm25.append(col.passage_bm25_scores(concat_ranges(offsets[dpos], offsets[dpos + 1]), q))
        else:
            docs, scores = found
        t2 = time.perf_counter()
        qp = np.stack([c["qp"] for c in self.contexts])
        self.results = col.device_passage_stage.run(qp, docs, scores, k, p["lam"], alpha, bm25)
        self.documents = [len(d) for d in docs]
        n = max(1, len(self.queries))
        self.doc_ms = (t2 - t) * 1000 / n
        self.passage_ms = (time.perf_counter() - t2) * 1000 / n
        self.k = k


def device_stages(r: StageResult, with_bm25: bool) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """The hits' per-stage ``(scores, ranks)``, as :meth:`DhrRetriever._search` reports them on the CPU."""
    stages = {"doc": (r.doc_score, r.doc_index + 1), "passage": (r.passage, r.passage_rank)}
    if with_bm25 and r.bm25 is not None and r.bm25_rank is not None:
        stages["dense"] = (r.dense, r.dense_rank)
        stages["bm25"] = (r.bm25, r.bm25_rank)
    return stages
