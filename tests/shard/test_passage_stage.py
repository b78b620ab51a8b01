"""DHR's passage-stage primitive: one contract for every backend, against one brute-force reference.

The backends are the ones a collection picks when it is opened: numpy on the
host (FAISS search), torch on the CPU (exact search: the code a GPU runs),
and three shards answering from their own indexes. The reference reads the
store (each document's passages by id, not the layout under test), the stored
float16 vectors and BM25's *full* score vector, and computes the semantics in
float64 by the definition: passage = α · BM25 / best + (1 − α) · dense,
final = passage + λ · document score, best first, ties by candidate order.

Here too: the torch backend's number of operations per batch does not grow
with the batch (the property that keeps a GPU from being bound by its host).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from hiera.builds import open_collection
from hiera.collection import Collection
from hiera.index.passage_stage import DocLists, PassageSpec, StageResult, TorchPassageStage
from hiera.models import cuda_available
from hiera.query import QueryBatch
from hiera.retrieve import get_retriever

QUERIES = ["volcanic eruptions and lava", "how jazz began in New Orleans", "the rules of chess", "photosynthesis"]
SPECS = [
    PassageSpec(lam=1.0, passage_alpha=0.0, k=5),
    PassageSpec(lam=0.7, passage_alpha=0.3, k=50),  # k larger than some queries' candidates
    PassageSpec(lam=0.5, passage_alpha=1.0, k=4, with_dense=False),  # hierarchical BM25
    PassageSpec(lam=0.0, passage_alpha=0.5, k=None),  # every candidate, unfused order (tuning)
]


@pytest.fixture(scope="module", params=["numpy", "torch-cpu", "3-shards"])
def backend(request: pytest.FixtureRequest, unsharded: Path, sharded3: Path) -> Collection:
    if request.param == "numpy":
        col = open_collection(unsharded, dense_search="faiss")
        assert col.passage_backend == "numpy"
    elif request.param == "torch-cpu":
        col = open_collection(unsharded, device="cpu", dense_search="exact")
        assert col.passage_backend == "torch"
    else:
        col = open_collection(sharded3)
        assert col.passage_backend.endswith("shards") and len(col.shards) == 3
    return col


def _doc_lists(n_docs: int) -> DocLists:
    """Fixed document lists (best first, scores descending): several, one, none, all."""
    rng = np.random.default_rng(11)
    lists = [rng.choice(n_docs, size=3, replace=False), np.array([n_docs - 1]), np.zeros(0, np.int64),
             rng.permutation(n_docs)]
    scores = [np.sort(rng.random(len(d)).astype(np.float32))[::-1].copy() for d in lists]
    scores[3][1] = scores[3][2]  # a tie between documents
    return DocLists([d.astype(np.int64) for d in lists], scores)


def _reference(col: Collection, batch: QueryBatch, docs: DocLists, spec: PassageSpec) -> list[list[tuple]]:
    """Per query: (passage id, score) of the expected hits, by the definition, from the store."""
    doc_rows = list(col.store.iter_docs())
    passage_pos = {p.id: i for i, p in enumerate(col.passages_at(range(col.n_passages)))}
    vectors = np.asarray(col.passage_vectors[0 : col.n_passages], dtype=np.float64)
    out = []
    for i, (dpos, dsc) in enumerate(zip(docs.positions, docs.scores, strict=True)):
        cands = []  # (passage id, position, document score), grouped by document, best document first
        for d, s in zip(dpos, dsc, strict=True):
            ids = [p.id for _, p in col.iter_passages([doc_rows[int(d)].id])]
            cands += [(pid, passage_pos[pid], float(s)) for pid in ids]
        if not cands:
            out.append([])
            continue
        pos = np.array([c[1] for c in cands])
        full = np.asarray(col.bm25_passages.scores(batch.texts[i]), dtype=np.float64)[pos]
        best = full.max()
        bm25 = full / best if best > 0 else full
        dense = vectors[pos] @ batch.vector("qp")[i].astype(np.float64)
        a = spec.passage_alpha
        passage = dense if a == 0 else bm25 if a >= 1 else a * bm25 + (1 - a) * dense
        final = passage + spec.lam * np.array([c[2] for c in cands])
        order = list(range(len(cands))) if spec.k is None else sorted(range(len(cands)), key=lambda j: (-final[j], j))
        out.append([(cands[j][0], final[j]) for j in order[: spec.k]])
    return out


def _ids(col: Collection, r: StageResult) -> list[str]:
    return [p.id for p in col.passages_at(r.positions)]


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: f"a{s.passage_alpha}-k{s.k}")
def test_every_backend_gives_the_reference(backend: Collection, spec: PassageSpec) -> None:
    col = backend
    batch = QueryBatch(QUERIES, vectors={"qp": col.passage_encoder.encode_query(QUERIES)})
    docs = _doc_lists(col.n_docs)
    got = col.passage_stage(batch, docs, spec)
    want = _reference(col, batch, docs, spec)
    assert len(got) == len(QUERIES)
    for r, w, d in zip(got, want, docs.positions, strict=True):
        assert _ids(col, r) == [pid for pid, _ in w]
        np.testing.assert_allclose(r.scores, [s for _, s in w], atol=2e-6)
        assert r.documents == len(d) and r.candidates >= len(r.positions)
        # the stages explain the score: passage + λ · document
        np.testing.assert_allclose(r.scores, r.passage + spec.lam * r.doc_score, atol=2e-6)
        if spec.k is not None and len(r.positions):
            assert r.passage_rank.min() >= 1 and (r.doc_index < len(d)).all()
    assert len(got[2].positions) == 0 and got[2].candidates == 0  # no documents, no passages
    assert sum(len(r.positions) for r in got) > 0


def test_device_document_lists_need_no_host_round_trip(unsharded: Path) -> None:
    """Documents handed over as device tensors (a dense document stage searched there) give the host lists' results,
    also when the first guess of the grid's capacity is too small and the batch runs again with room."""
    import torch

    col = open_collection(unsharded, device="cpu", dense_search="exact")
    batch = QueryBatch(QUERIES, vectors={"qp": col.passage_encoder.encode_query(QUERIES)})
    docs = _doc_lists(col.n_docs)
    width = max(len(d) for d in docs.positions)
    pos = torch.full((len(QUERIES), width), -1, dtype=torch.int64)
    sc = torch.zeros((len(QUERIES), width))
    for i, (d, s) in enumerate(zip(docs.positions, docs.scores, strict=True)):
        pos[i, : len(d)], sc[i, : len(d)] = torch.from_numpy(d), torch.from_numpy(s)
    stage = col._passage_stage
    assert isinstance(stage, TorchPassageStage)
    stage.mean_len = 0.01  # a capacity guess of 256 slots: the all-documents query needs more
    stage._capacity.clear()
    spec = PassageSpec(lam=1.0, passage_alpha=0.0, k=100)
    want = col.passage_stage(batch, docs, spec)
    got = col.passage_stage(batch, DocLists(pos, sc), spec)
    for a, b in zip(got, want, strict=True):
        assert a.positions.tolist() == b.positions.tolist() and a.candidates == b.candidates
        np.testing.assert_allclose(a.scores, b.scores, atol=1e-6)
    if col.n_passages > 256:
        assert stage._capacity[width] >= col.n_passages  # learnt from the overflow


def test_dense_dhr_on_the_torch_device_hands_its_document_search_to_the_passage_stage(unsharded: Path) -> None:
    """The dense configuration searched exactly on the torch device: the document stage's search reaches the passage
    stage unrun (on a GPU both run in one graph), and the ranking is the host's FAISS path's."""
    from hiera.score.docstage import stage as doc_stage

    params = {"doc_stage": "mean", "passage_alpha": 0.0, "lam": 1.0, "top_docs": 4}
    dev = open_collection(unsharded, device="cpu", dense_search="exact")
    host = open_collection(unsharded, dense_search="faiss")
    batch = QueryBatch(QUERIES, vectors={"qp": dev.passage_encoder.encode_query(QUERIES)})
    docs = doc_stage("mean").top_batch(dev, batch, 4, on_device=True)
    assert docs.search is not None and docs.positions is None  # described, not run
    for q in QUERIES:
        got = get_retriever("dhr", dev).search(q, k=10, **params)
        want = get_retriever("dhr", host).search(q, k=10, **params)
        assert [h.passage_id for h in got.hits] == [h.passage_id for h in want.hits]
        np.testing.assert_allclose([h.score for h in got.hits], [h.score for h in want.hits], atol=1e-5)
        steps = {s.name: s.detail for s in got.trace}
        assert steps["doc-stage"].get("run") == "inside the passage stage"
        assert steps["passage-stage"]["backend"] == "torch"


def _torch_ops(stage: TorchPassageStage, n: int, spec: PassageSpec, docs_on_device: bool) -> int:
    import torch
    from torch.profiler import ProfilerActivity, profile

    rng = np.random.default_rng(n)
    n_docs = len(stage.offsets_host) - 1
    lists = [rng.choice(n_docs, size=20, replace=False) for _ in range(n)]
    scores = [np.sort(rng.random(20).astype(np.float32))[::-1].copy() for _ in range(n)]
    docs = DocLists(torch.from_numpy(np.stack(lists)), torch.from_numpy(np.stack(scores))) if docs_on_device \
        else DocLists(lists, scores)
    q = rng.standard_normal((n, stage.matrix.shape[1])).astype(np.float32)
    texts = ["q"] * n
    stage.run(texts, q, docs, spec)  # warm: the capacity is learnt
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        stage.run(texts, q, docs, spec)
    # operators called by the stage itself (not the ones they call in turn)
    return sum(1 for e in prof.events() if e.name.startswith("aten::")
               and (e.cpu_parent is None or not e.cpu_parent.name.startswith("aten::")))


@pytest.mark.parametrize("docs_on_device", [True, False], ids=["device-docs", "host-docs"])
def test_torch_operations_per_batch_do_not_grow_with_the_batch(docs_on_device: bool) -> None:
    import torch

    rng = np.random.default_rng(0)
    sizes = rng.integers(1, 12, size=2000)
    offsets = np.concatenate(([0], np.cumsum(sizes))).astype(np.int64)
    matrix = torch.from_numpy(rng.standard_normal((int(offsets[-1]), 32)).astype(np.float32))
    stage = TorchPassageStage(matrix, offsets, "cpu", bm25_at=lambda t, p: np.ones(len(p), np.float32))
    for spec in (PassageSpec(1.0, 0.0, 10), PassageSpec(1.0, 0.3, 10)):
        counts = {n: _torch_ops(stage, n, spec, docs_on_device) for n in (1, 8, 32)}
        assert len(set(counts.values())) == 1, counts
        assert counts[1] <= 100, counts  # a fixed, small number per batch


def test_a_sharded_build_refuses_exact_dense_search_in_one_line(sharded3: Path, capsys: pytest.CaptureFixture) -> None:
    """The shards search their own FAISS indexes where they run: exact search cannot be honoured, and says so."""
    from hiera.cli.main import main
    from hiera.errors import BadInputError

    with pytest.raises(BadInputError, match="sharded build"):
        open_collection(sharded3, dense_search="exact")
    rc = main(["search", str(sharded3), "volcano", "--dense-search", "exact"])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and "--dense-search exact" in err[0], err
    col = open_collection(sharded3)  # auto: what the shards can do, and the trace says which
    res = get_retriever("dhr", col).search("lava")
    answered = {s.name: s.detail for s in res.trace}["answered-by"]
    assert answered["dense_search"] == "faiss" and answered["passage_stage"].endswith("shards")


class _FakeCuda:
    """torch.cuda's stream and graph calls, recorded in order (a CPU cannot capture a graph)."""

    def __init__(self) -> None:
        from contextlib import contextmanager

        self.log: list[str] = []
        self.where = "main"
        log = self.log

        class Stream:
            def __init__(self, name: str = "side") -> None:
                self.name = name

            def wait_stream(self, other: object) -> None:
                log.append(f"{self.name} waits for {other.name}")

        self.Stream = Stream
        self._main = Stream("main")

        @contextmanager
        def stream(s: Stream):  # noqa: ANN202 - a context manager
            before, self.where = self.where, s.name
            yield
            self.where = before

        @contextmanager
        def graph(g: object):  # noqa: ANN202 - a context manager
            before, self.where = self.where, "capture"
            yield
            self.where = before

        self.stream, self.graph = stream, graph
        self.CUDAGraph = lambda: "graph"

    def current_stream(self) -> object:
        return self._main


def test_a_graph_is_captured_after_a_warm_up_on_a_side_stream() -> None:
    """Both captures (the grid alone and the fused document search) warm up on a side stream the main stream then
    waits for, and return what the captured run made (the graph's output buffers)."""
    import types

    stage = TorchPassageStage.__new__(TorchPassageStage)
    fake = _FakeCuda()
    stage._torch = types.SimpleNamespace(cuda=fake)
    runs = []

    def body() -> str:
        runs.append(fake.where)
        fake.log.append(f"body on {fake.where}")
        return f"made on {fake.where}"

    graph, out = stage._graphed(body)
    assert (graph, out) == ("graph", "made on capture")
    assert runs == ["side", "capture"]
    assert fake.log == ["side waits for main", "body on side", "main waits for side", "body on capture"]


@pytest.mark.skipif(not cuda_available(), reason="no CUDA device: the GPU path runs on a lent GPU machine only")
@pytest.mark.parametrize("spec", SPECS, ids=lambda s: f"a{s.passage_alpha}-k{s.k}")
def test_the_gpu_backend_gives_the_host_backend_results(unsharded: Path, spec: PassageSpec) -> None:
    """The same query vectors and documents on both: the GPU's float16 matrix is read in float32, so the hits are
    the host's and the scores equal to float32 rounding."""
    gpu = open_collection(unsharded, device="cuda", dense_search="exact")
    host = open_collection(unsharded, device="cpu", dense_search="faiss")
    assert gpu.passage_backend == "torch" and host.passage_backend == "numpy"
    vectors = {"qp": host.passage_encoder.encode_query(QUERIES)}
    docs = _doc_lists(host.n_docs)
    got = gpu.passage_stage(QueryBatch(QUERIES, vectors=vectors), docs, spec)
    want = host.passage_stage(QueryBatch(QUERIES, vectors=vectors), docs, spec)
    for a, b in zip(got, want, strict=True):
        assert a.positions.tolist() == b.positions.tolist() and a.passage_rank.tolist() == b.passage_rank.tolist()
        np.testing.assert_allclose(a.scores, b.scores, atol=1e-5)


@pytest.mark.skipif(not cuda_available(), reason="no CUDA device: the GPU path runs on a lent GPU machine only")
def test_the_fused_graph_gives_the_stages_run_apart(unsharded: Path) -> None:
    """The document search captured with the passage stage in one CUDA graph returns what the two stages run apart
    return, also for a batch whose candidates overflow the first capacity (rerun from the graph's documents)."""
    import torch

    from hiera.index.passage_stage import DeviceSearch
    from hiera.score.docstage import stage as doc_stage

    col = open_collection(unsharded, device="cuda", dense_search="exact")
    stage = col._passage_stage
    assert isinstance(stage, TorchPassageStage) and stage.graphs
    index = doc_stage("mean")._device_index(col)
    assert index is not None
    q = torch.from_numpy(col.passage_encoder.encode_query(QUERIES)).cuda()
    spec = PassageSpec(lam=1.0, passage_alpha=0.0, k=20)
    for k_docs in (3, col.n_docs):
        stage.mean_len = 0.01  # the first capacity is too small for every document's passages
        stage._capacity.clear()
        search = DeviceSearch(index, q, k_docs)
        fused = stage.run(QUERIES, q, DocLists.deferred(search), spec)
        assert stage.fuse, stage.graph_note
        apart = stage.run(QUERIES, q, DocLists.deferred(search).resolved(), spec)
        for a, b in zip(fused, apart, strict=True):
            assert a.positions.tolist() == b.positions.tolist()
            np.testing.assert_allclose(a.scores, b.scores, atol=1e-6)
