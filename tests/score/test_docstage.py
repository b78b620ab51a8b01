"""Document stages scored directly (top-k and all-documents views) against the model's own vectors."""

from __future__ import annotations

import helpers
import numpy as np
import pytest

from hiera.collection import Collection
from hiera.query import text_query
from hiera.score.docstage import DOC_STAGES
from hiera.score.docstage import stage as doc_stage

ATOL = 1e-2  # index vectors are stored as float16


@pytest.mark.parametrize("stage", DOC_STAGES)
def test_doc_stage_scorers_directly(col: Collection, ref: helpers.Reference, stage: str) -> None:
    q = "lava and jazz saxophone"
    qv = ref.query(q)
    query = text_query(q, qp=qv, qd=qv)
    pos, sc = doc_stage(stage).top(col, query, col.n_docs)
    full = doc_stage(stage).all(col, query)
    assert full.shape == (col.n_docs,)
    assert np.all(np.diff(sc) <= 1e-7) and np.all(np.abs(sc) <= 1 + 1e-5)
    # both views agree (summary: FAISS float32 vectors vs the float16 matrix)
    np.testing.assert_allclose(full[pos], sc, atol=1e-3)
    top2 = {d.id for d in col.docs_at(pos[:2])}
    assert top2 == {"volcanoes", "jazz"}, (stage, top2)
    # k1 cuts the same ranking
    pos1, sc1 = doc_stage(stage).top(col, query, 1)
    assert pos1.tolist() == pos[:1].tolist()

    ps = ref.P @ qv
    expect = None
    if stage == "summary":
        expect = ref.D @ qv
    elif stage == "mean":
        means = np.stack([ref.P[ref.passage_doc == i].mean(axis=0) for i in range(len(ref.doc_ids))])
        expect = (means / np.linalg.norm(means, axis=1, keepdims=True)) @ qv
    elif stage == "passage-max":
        expect = np.array([ps[ref.passage_doc == i].max() for i in range(len(ref.doc_ids))])
    elif stage == "hybrid-max":
        bm = col.bm25_passages.scores(q)
        bmax = np.array([bm[ref.passage_doc == i].max() for i in range(len(ref.doc_ids))])
        # the BM25 list (200 deep) holds every matching passage here: a document it misses matched nothing
        bnorm = bmax / bmax.max()
        dmax = np.array([ps[ref.passage_doc == i].max() for i in range(len(ref.doc_ids))])
        expect = 0.35 * bnorm + 0.65 * dmax
    if expect is not None:
        np.testing.assert_allclose(full, expect, atol=ATOL)


def test_hybrid_max_searches_deeper_until_it_holds_k_documents(col: Collection, ref: helpers.Reference) -> None:
    q = "lava and jazz saxophone"
    qv = ref.query(q)
    docs, b, d = doc_stage("hybrid-max").components(col, text_query(q, qp=qv, qd=qv), 2, 5)
    assert len(docs) >= 5  # two passages hold at most two documents: the lists went deeper
    ps = ref.P @ qv
    dmax = np.array([ps[ref.passage_doc == i].max() for i in docs])
    np.testing.assert_allclose(d, dmax, atol=ATOL)  # each one's dense part is its best passage's, as at depth


def test_hybrid_max_gives_no_bm25_credit_to_a_document_without_the_query_terms(col: Collection, ref: helpers.Reference,
                                                                              ) -> None:
    """A BM25 list shorter than its depth holds every match, so a document it lacks has a BM25 part of 0, never the
    weakest match's score (which let texts without the terms outrank texts with them)."""
    q = "saxophone"
    qv = ref.query(q)
    bm = col.bm25_passages.scores(q)
    matched = {int(ref.passage_doc[i]) for i in np.flatnonzero(bm > 0)}
    assert 0 < len(matched) < col.n_docs
    docs, b, d = doc_stage("hybrid-max").components(col, text_query(q, qp=qv, qd=qv), 200, col.n_docs)
    assert len(docs) == col.n_docs
    for doc, lexical in zip(docs.tolist(), b.tolist(), strict=True):
        assert (lexical > 0) == (doc in matched), doc
