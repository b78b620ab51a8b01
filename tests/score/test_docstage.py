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
        seen = bmax > 0  # BM25 lists only matching passages; a missed document gets the list's minimum
        bnorm = np.where(seen, bmax / bmax.max(), (bmax[seen] / bmax.max()).min())
        dmax = np.array([ps[ref.passage_doc == i].max() for i in range(len(ref.doc_ids))])
        expect = 0.35 * bnorm + 0.65 * dmax
    if expect is not None:
        np.testing.assert_allclose(full, expect, atol=ATOL)
