"""DHR's passage stage on the torch search device gives the CPU path's hits, scores, stages and ranks.

The device path (:mod:`hiera.retrieve.dhr_device`, :class:`hiera.index.exact.DevicePassageStage`)
is what a GPU runs; here it runs on the CPU (``device="cpu"``), against the
FAISS/numpy path (``device="faiss"``) on the same build.
"""

from __future__ import annotations

from pathlib import Path

import helpers
import numpy as np
import pytest

from hiera.builds import open_collection
from hiera.collection import Collection
from hiera.index.exact import DevicePassageStage, TorchExactIndex, cuda_available
from hiera.index.select import concat_ranges, topk
from hiera.retrieve import get_retriever
from hiera.retrieve.dhr import Candidates
from hiera.score.fusion import dhr_score

QUERIES = [q for _, q in list(helpers.TOPIC_QUERIES.items())]
CONFIGS = [
    {},  # the default: hybrid-max documents, hybrid passage stage
    {"doc_stage": "summary", "passage_alpha": 0.0},  # both stages on the device
    {"doc_stage": "mean", "passage_alpha": 0.0, "top_docs": 2},
    {"doc_stage": "summary", "passage_alpha": 0.5, "lam": 0.3},
    {"doc_stage": "bm25", "passage_alpha": 0.0, "top_docs": 3},
]


def _flat(col: Collection, params: dict, queries: list[str], k: int = 8) -> tuple[list, np.ndarray]:
    """(every hit's id and stage ranks, every score): ids and ranks must be equal, scores equal to float32 rounding
    (a dot product summed in another order moves the last bit)."""
    res = get_retriever("dhr", col, **params).batch_search(queries, k=k)
    keys = [[(h.passage_id, *((n, s.rank) for n, s in sorted(h.stages.items()))) for h in r.hits] for r in res]
    scores = [x for r in res for h in r.hits for x in (h.score, *(s.score for _, s in sorted(h.stages.items())))]
    return keys, np.array(scores)


def _same(a: tuple[list, np.ndarray], b: tuple[list, np.ndarray]) -> bool:
    return a[0] == b[0] and np.allclose(a[1], b[1], atol=2e-6)


@pytest.fixture(scope="module")
def cols(shared_root: Path) -> tuple[Collection, Collection]:
    return open_collection(shared_root, device="cpu"), open_collection(shared_root, device="faiss")


@pytest.mark.parametrize("params", CONFIGS, ids=lambda p: ",".join(f"{k}={v}" for k, v in p.items()) or "default")
def test_device_passage_stage_equals_the_cpu_path(cols: tuple[Collection, Collection], params: dict) -> None:
    dev, ref = cols
    assert dev.device_passage_stage is not None and ref.device_passage_stage is None
    got, want = _flat(dev, params, QUERIES), _flat(ref, params, QUERIES)
    assert _same(got, want)
    assert any(len(r) > 1 for r in got[0])
    # one query alone, and a k larger than some candidate lists, agree too
    assert _same(_flat(dev, params, QUERIES[:1], k=50), _flat(ref, params, QUERIES[:1], k=50))


def test_device_trace_says_where_and_how_many(cols: tuple[Collection, Collection]) -> None:
    res = get_retriever("dhr", cols[0]).batch_search(QUERIES[:3], k=5)
    steps = {s.name: s for s in res[0].trace}
    assert steps["doc-stage+gather"].detail["device"] == "cpu"
    assert steps["doc-stage+gather"].detail["candidates"] > 0
    assert steps["passage-stage"].detail["batched"] == 3


def test_passage_stage_matches_candidates_with_ties_and_float16() -> None:
    """Synthetic: duplicate passages (equal scores) ordered as the numpy path orders them, float16 matrix included."""
    rng = np.random.default_rng(3)
    vecs = rng.standard_normal((300, 16)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    vecs[10:14] = vecs[10]  # four identical passages in one document
    vecs = vecs.astype(np.float16).astype(np.float32)
    offsets = np.concatenate(([0], np.cumsum(rng.integers(1, 9, size=60))))
    offsets = offsets[offsets <= 300]
    offsets = np.append(offsets, 300) if offsets[-1] != 300 else offsets
    q = vecs[11] + 0.01
    docs = np.array([5, 1, 2, 9, 3], dtype=np.int64)
    dsc = np.array([0.9, 0.7, 0.6, 0.4, 0.2], dtype=np.float32)
    cand = concat_ranges(offsets[docs], offsets[docs + 1])
    per_doc = np.repeat(np.arange(len(docs)), offsets[docs + 1] - offsets[docs])
    bm25 = rng.random(len(cand)).astype(np.float32)
    for dtype in (None, "float16"):
        stage = DevicePassageStage(TorchExactIndex(vecs, "cpu", dtype=dtype), offsets)
        for alpha in (0.0, 0.4):
            c = Candidates(docs, dsc, cand, vecs[cand] @ q, per_doc, bm25)
            _, final = c.fused(0.8, passage_alpha=alpha)
            sel, fsc = topk(final, 7)
            [r] = stage.run(q[None], [docs], [dsc], 7, 0.8, alpha, [bm25])
            assert r.positions.tolist() == cand[sel].tolist()
            assert np.allclose(r.scores, fsc, atol=1e-6)
            assert r.candidates == len(cand) and r.doc_index.tolist() == per_doc[sel].tolist()
            assert np.allclose(r.scores, dhr_score(r.passage, r.doc_score, 0.8), atol=1e-6)


@pytest.mark.skipif(not cuda_available(), reason="no CUDA device: the GPU path runs on a lent GPU machine only")
def test_cuda_dhr_equals_the_cpu_path(shared_root: Path) -> None:
    gpu, ref = open_collection(shared_root, device="cuda"), open_collection(shared_root, device="faiss")
    for params in CONFIGS:
        assert _same(_flat(gpu, params, QUERIES), _flat(ref, params, QUERIES))

