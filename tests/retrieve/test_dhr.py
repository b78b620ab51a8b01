"""DHR against a brute-force numpy reference, and every document stage on the tiny collection."""

from __future__ import annotations

import helpers
import numpy as np
import pytest

from hiera.builds import open_collection
from hiera.collection import Collection
from hiera.errors import BadInputError
from hiera.retrieve import get_retriever
from hiera.score.docstage import DOC_STAGES

BASE_IDS = [d.id for d in helpers.make_docs()]
ATOL = 1e-2  # index vectors are stored as float16


def assert_ranking(hits, ref_scores: dict[str, float], k: int, atol: float = ATOL) -> None:
    """Same ids in the same order as the reference, up to swaps of near-ties; scores within atol."""
    want = sorted(ref_scores.items(), key=lambda kv: -kv[1])[:k]
    assert len(hits) == len(want)
    for h, (pid, score) in zip(hits, want, strict=True):
        assert h.passage_id in ref_scores, h.passage_id
        assert h.score == pytest.approx(ref_scores[h.passage_id], abs=atol)
        if h.passage_id != pid:  # only a near-tie may be ordered differently
            assert abs(ref_scores[h.passage_id] - score) < atol, (h.passage_id, pid)


def test_stored_vectors_are_the_model_vectors_of_the_store_texts(col: Collection, ref: helpers.Reference) -> None:
    assert [d.id for d in col.docs_at(range(col.n_docs))] == ref.doc_ids
    assert [p.id for p in col.passages_at(range(col.n_passages))] == ref.passage_ids
    np.testing.assert_allclose(col.passage_vectors.astype(np.float32), ref.P, atol=2e-3)
    np.testing.assert_allclose(col.doc_vectors.astype(np.float32), ref.D, atol=2e-3)


@pytest.mark.parametrize(("lam", "k1"), [(1.0, 100), (1.0, 2), (0.5, 3), (2.0, 1), (0.0, 1), (0.0, 6), (1.0, 6)])
def test_dhr_equals_the_brute_force_reference(col: Collection, ref: helpers.Reference, lam: float, k1: int) -> None:
    dhr = get_retriever("dhr", col)
    queries = [helpers.TOPIC_QUERIES[d] for d in BASE_IDS[:4]] + ["lava and jazz saxophone"]
    # the paper's method: the dense passage stage (passage_alpha 0)
    batch = dhr.batch_search(queries, k=8, lam=lam, top_docs=k1, doc_stage="summary", passage_alpha=0.0)
    for q, res in zip(queries, batch, strict=True):
        chosen, scores = ref.dhr(ref.query(q), k1, lam)
        assert {h.doc_id for h in res} <= set(chosen)
        if k1 == 1:
            assert {h.doc_id for h in res} == {chosen[0]}  # only the best document's passages
        assert_ranking(res.hits, scores, 8)
        for h in res:
            assert h.stages["doc"].rank == chosen.index(h.doc_id) + 1


def test_dhr_with_lambda_zero_over_all_documents_is_flat_dense(col: Collection) -> None:
    q = helpers.TOPIC_QUERIES["roman-empire"]
    a = get_retriever("dhr", col).search(q, k=10, lam=0.0, top_docs=col.n_docs, passage_alpha=0.0)
    b = get_retriever("dense", col).search(q, k=10)
    assert [h.passage_id for h in a] == [h.passage_id for h in b]
    np.testing.assert_allclose([h.score for h in a], [h.score for h in b], atol=2e-3)


def test_dhr_doc_level_is_the_document_ranking(col: Collection, ref: helpers.Reference) -> None:
    queries = [helpers.TOPIC_QUERIES[d] for d in BASE_IDS]
    results = get_retriever("dhr", col).batch_search(queries, k=6, level="doc", doc_stage="summary")
    for doc_id, q, res in zip(BASE_IDS, queries, results, strict=True):
        ds = ref.D @ ref.query(q)
        assert res[0].doc_id == doc_id
        got = {h.doc_id: h.score for h in res}
        assert set(got) == set(ref.doc_ids)
        for i, d in enumerate(ref.doc_ids):
            assert got[d] == pytest.approx(float(ds[i]), abs=ATOL)


@pytest.mark.parametrize("lam", [0.0, 0.5, 1.0, 3.0])
def test_dhr_parallel_equals_the_formula_over_all_documents(col: Collection, ref: helpers.Reference, lam: float) -> None:
    queries = [helpers.TOPIC_QUERIES[d] for d in BASE_IDS[3:]] + ["lava and jazz saxophone"]
    results = get_retriever("dhr-parallel", col).batch_search(queries, k=10, lam=lam, doc_stage="summary")
    for q, res in zip(queries, results, strict=True):
        _, scores = ref.dhr(ref.query(q), len(ref.doc_ids), lam)
        assert len(scores) == col.n_passages
        assert_ranking(res.hits, scores, 10)


def test_bm25_dhr_only_returns_passages_of_the_top_bm25_documents(col: Collection) -> None:
    q = "volcano lava eruption and chess knight"
    bm = get_retriever("bm25-dhr", col)
    dscores = col.bm25_docs.scores(q)
    order = [int(i) for i in np.argsort(-dscores, kind="stable") if dscores[i] > 0]
    assert len(order) >= 2
    doc_ids = [d.id for d in col.docs_at(order)]
    pscores = col.bm25_passages.scores(q)
    for k1 in (1, 2, 3):
        lam = 0.7
        res = bm.search(q, k=10, top_docs=k1, lam=lam)
        assert {h.doc_id for h in res} <= set(doc_ids[:k1])
        if k1 == 1:
            assert {h.doc_id for h in res} == {doc_ids[0]}
        # the reference: BM25 scores divided by the best document / best candidate passage
        chosen = set(order[:k1])
        cand = [i for i in range(col.n_passages) if int(col.passage_doc[i]) in chosen]
        top = max(pscores[cand])
        want = {
            col.passages_at([i])[0].id: pscores[i] / top + lam * dscores[col.passage_doc[i]] / dscores[order[0]]
            for i in cand
        }
        assert_ranking(res.hits, want, 10, atol=1e-4)
        assert res[0].stages["doc"].score <= 1.0 + 1e-6
        assert max(h.stages["doc"].score for h in res) == pytest.approx(1.0)
    doc_res = bm.search(q, k=3, level="doc")
    assert [h.doc_id for h in doc_res] == doc_ids[:3]
    assert doc_res[0].score == pytest.approx(1.0)


@pytest.mark.parametrize("stage", DOC_STAGES)
def test_every_doc_stage_ranks_the_on_topic_document_first(col: Collection, stage: str) -> None:
    queries = [helpers.TOPIC_QUERIES[d] for d in BASE_IDS]
    for name in ("dhr", "dhr-parallel"):  # top-k (DocStage.top) and all documents (DocStage.all)
        results = get_retriever(name, col).batch_search(queries, k=6, level="doc", doc_stage=stage)
        for doc_id, res in zip(BASE_IDS, results, strict=True):
            assert res[0].doc_id == doc_id, (name, stage, res.query)
            scores = [h.score for h in res]
            assert all(-1.0 - 1e-5 <= s <= 1.0 + 1e-5 for s in scores), (name, stage, scores)
            if stage in ("bm25", "bm25-passage-max", "fused"):
                assert scores[0] == pytest.approx(1.0)  # divided by the best document
                # top-k1 keeps only matching documents; the all-documents view scores the rest 0
                assert all(s > 0 if name == "dhr" else s >= 0 for s in scores)
    # and the passage level uses it: the first passage comes from the on-topic document
    top = get_retriever("dhr", col).batch_search(queries, k=1, doc_stage=stage, top_docs=2)
    assert [r[0].doc_id for r in top] == BASE_IDS, stage


def test_mean_vectors_are_normalized_passage_means(col: Collection, ref: helpers.Reference) -> None:
    P = col.passage_vectors.astype(np.float32)
    off = col.doc_offsets
    for i in range(col.n_docs):
        m = P[off[i] : off[i + 1]].mean(axis=0)
        np.testing.assert_allclose(col.doc_mean_vectors[i].astype(np.float32), m / np.linalg.norm(m), atol=2e-3)
        r = ref.P[ref.passage_doc == i].mean(axis=0)
        np.testing.assert_allclose(col.doc_mean_vectors[i].astype(np.float32), r / np.linalg.norm(r), atol=ATOL)
    norms = np.linalg.norm(col.doc_mean_vectors.astype(np.float32), axis=1)
    np.testing.assert_allclose(norms, 1.0, atol=2e-3)


def test_float32_vectors_give_the_same_results(col: Collection, shared_root) -> None:
    """``vectors="float32"`` only changes where the upcast happens, not what DHR and the dense stages return."""
    col32 = open_collection(shared_root, vectors="float32")
    assert col32.passage_vectors.dtype == np.float32 and col.passage_vectors.dtype == np.float16
    np.testing.assert_array_equal(col32.passage_vectors, col.passage_vectors.astype(np.float32))
    assert not isinstance(col32.passage_vectors, np.memmap)
    for stage in ("summary", "mean", "hybrid-max"):
        a = get_retriever("dhr", col, doc_stage=stage).search(helpers.TOPIC_QUERIES["jazz"], k=5)
        b = get_retriever("dhr", col32, doc_stage=stage).search(helpers.TOPIC_QUERIES["jazz"], k=5)
        assert [h.passage_id for h in a] == [h.passage_id for h in b]
        assert [h.score for h in a] == pytest.approx([h.score for h in b], abs=1e-5)


def test_unknown_vector_dtype_is_refused(shared_root) -> None:
    with pytest.raises(BadInputError, match="vectors must be one of float16, float32, got 'float64'"):
        open_collection(shared_root, vectors="float64")


def test_hybrid_passage_stage_mixes_bm25_within_the_chosen_documents(col: Collection) -> None:
    q = helpers.TOPIC_QUERIES["volcanoes"]
    dhr = get_retriever("dhr", col, doc_stage="bm25", top_docs=2)
    dense = dhr.search(q, k=50, lam=0.0, passage_alpha=0.0)
    assert dense.params["passage_alpha"] == 0.0 and all(set(h.stages) == {"doc", "passage"} for h in dense)
    only_bm25 = dhr.search(q, k=50, lam=0.0, passage_alpha=1.0)
    # the same candidates (passages of the two chosen documents), ordered by BM25 alone
    assert {h.passage_id for h in only_bm25} == {h.passage_id for h in dense}
    bm25 = {p: s for p, s in zip(*col.bm25_passages.search(q, col.n_passages), strict=True)}
    positions = {p.id: i for i, p in enumerate(col.passages_at(range(col.n_passages)))}
    got = [bm25.get(positions[h.passage_id], 0.0) for h in only_bm25]
    assert got == sorted(got, reverse=True)
    top = max(got)
    for h in only_bm25:
        assert h.stages["bm25"].score == pytest.approx(bm25.get(positions[h.passage_id], 0.0), rel=1e-5)
        assert h.score == pytest.approx(h.stages["bm25"].score / top, rel=1e-5)
    half = dhr.search(q, k=50, lam=0.5, passage_alpha=0.3)
    for h in half:
        mixed = 0.3 * h.stages["bm25"].score / top + 0.7 * h.stages["dense"].score
        assert h.stages["passage"].score == pytest.approx(mixed, abs=1e-5)  # the stage is the mix, its parts beside it
        assert h.score == pytest.approx(mixed + 0.5 * h.stages["doc"].score, abs=1e-5)
