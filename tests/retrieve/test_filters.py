"""Filtered search, method by method, against a brute-force reference of the semantics.

Whenever at least k passages match, k come back, ranked as the method over
the whole collection would rank them with every disallowed document and
passage removed from its candidates (the collection's statistics unchanged).
The reference recomputes each method's scores over every row with numpy and
removes the disallowed ones; the collection is 62 real Wikipedia articles
(wikitext-2's test split), filtered by random document sets of about 1, 10
and 50 % and by real fields.
"""

from __future__ import annotations

import re
from pathlib import Path

import helpers
import numpy as np
import pytest

from hiera.builds import open_collection
from hiera.collection import Collection
from hiera.corpus.tree import Document, Section
from hiera.errors import BadInputError
from hiera.fusion import Ranked, by_max, dhr_score, passage_score, rrf
from hiera.index.build import BuildOptions
from hiera.index.filters import compile_filter
from hiera.index.select import topk
from hiera.query import Allowed
from hiera.retrieve import get_retriever

QUERIES = ["who starred in the television series", "the hurricane made landfall", "battle casualties of the army",
           "album released by the band"]


def wiki_docs(path: Path, n: int = 64) -> list[Document]:
    """The first ``n`` articles of wikitext-2: lead and up to three sections, each its first paragraph (60 words),
    with metadata to filter on (source, year, a date; every fifth a merged document with two sources)."""
    text = path.read_text(encoding="utf-8")
    arts = re.split(r"^ = ([^=].*?) = \s*$", text, flags=re.M)
    docs: list[Document] = []

    def first(body: str) -> list[str]:
        return [" ".join(p.split()[:60]) for p in body.split("\n") if p.strip() and not p.strip().startswith("=")][:1]

    for i in range(1, len(arts) - 1, 2):
        parts = re.split(r"^ = = ([^=].*?) = = \s*$", arts[i + 1], flags=re.M)
        sections = [Section(parts[j].strip(), paragraphs=first(parts[j + 1])) for j in range(1, min(len(parts) - 1, 7), 2)]
        k = len(docs)
        meta: dict = {"source": "wiki-a" if k % 2 else "wiki-b", "year": 1990 + k % 30,
                      "published": f"20{10 + k % 12:02d}-0{1 + k % 9}-15"}
        if k % 5 == 0:
            meta["sources"] = [{"id": f"w{k}", "source": "wiki-a"}, {"id": f"w{k}x", "source": "ovos"}]
        docs.append(Document(id=f"w{k}", title=arts[i].strip(), lead=first(parts[0]), sections=sections,
                             categories=["even" if k % 2 == 0 else "odd"], metadata=meta))
        if len(docs) == n:
            break
    return docs


@pytest.fixture(scope="module")
def wcol(data_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Collection:
    root = tmp_path_factory.mktemp("filtered") / "col"
    opts = BuildOptions(progress=False, cache_dir=helpers.session_cache_dir(tmp_path_factory))
    helpers.build_collection(root, wiki_docs(data_dir / "wikitext2" / "wiki.test.raw"), opts)
    return open_collection(root)


def _random_filter(col: Collection, share: float, seed: int) -> str:
    ids = [d.id for d in col.iter_docs()]
    rng = np.random.default_rng(seed)
    chosen = rng.choice(len(ids), size=max(1, round(share * len(ids))), replace=False)
    return "id in (" + ", ".join(ids[i] for i in sorted(chosen)) + ")"


FIELD_FILTERS = ["source = ovos", "year >= 2010", "published < 2013-01-01 and not categories = odd",
                 "section prefix career or section = ''", "title prefix the"]


def _filters(col: Collection) -> list[str]:
    return [_random_filter(col, s, i) for i, s in enumerate((0.01, 0.1, 0.5))] + FIELD_FILTERS


# -- the reference --------------------------------------------------------------------------------------------
def _dense_all(col: Collection, q: np.ndarray, level: str = "passage") -> np.ndarray:
    m = col.passage_vectors if level == "passage" else col.doc_mean_vectors
    return np.asarray(m, dtype=np.float32) @ q


def _masked_top(scores: np.ndarray, mask: np.ndarray, k: int, positive_only: bool = False):
    rows = np.flatnonzero(mask)
    idx, vals = topk(scores[rows], k, positive_only=positive_only)
    return rows[idx], vals


def ref_bm25(col: Collection, text: str, allowed: Allowed, k: int):
    return _masked_top(col.bm25_passages.scores(text), allowed.passages, k, positive_only=True)


def ref_dense(col: Collection, qp: np.ndarray, allowed: Allowed, k: int):
    return _masked_top(_dense_all(col, qp), allowed.passages, k)


def ref_hybrid(col: Collection, text: str, qp: np.ndarray, allowed: Allowed, k: int, depth: int = 100):
    b = ref_bm25(col, text, allowed, depth)
    d = ref_dense(col, qp, allowed, depth)
    a, fused = rrf([Ranked(*b), Ranked(*d)])
    sel, sc = topk(fused, k)
    return a.ids[sel], sc


def ref_dhr(col: Collection, text: str, qp: np.ndarray, allowed: Allowed, k: int, lam: float, top_docs: int,
            alpha: float, doc_stage: str):
    if doc_stage == "mean":
        docs, dsc = _masked_top(_dense_all(col, qp, "doc"), allowed.docs, top_docs)
    else:  # bm25 over documents, divided by the best allowed score
        docs, dsc = _masked_top(col.bm25_docs.scores(text), allowed.docs, top_docs, positive_only=True)
        dsc = by_max(dsc)
    off = col.doc_offsets
    cands = [(p, i) for i, d in enumerate(docs) for p in range(off[d], off[d + 1]) if allowed.passages[p]]
    pos = np.array([c[0] for c in cands], dtype=np.int64)
    per_doc = np.array([c[1] for c in cands], dtype=np.int64)
    dense = _dense_all(col, qp)[pos]
    bm25 = col.bm25_passages.scores(text)[pos] if alpha > 0 else None
    final = dhr_score(passage_score(dense, bm25, alpha), dsc[per_doc].astype(np.float32), lam)
    sel, sc = topk(final, k)
    return pos[sel], sc


def _check(hits, want_pos, want_sc, col: Collection, atol: float = 1e-4) -> None:
    got = [h.passage_id for h in hits]
    want = [p.id for p in col.passages_at(want_pos)]
    assert got == want
    np.testing.assert_allclose([h.score for h in hits], want_sc, atol=atol, rtol=1e-4)


# -- the methods against it -----------------------------------------------------------------------------------
@pytest.mark.parametrize("k", [5, 20])
def test_bm25_dense_hybrid_equal_the_reference(wcol: Collection, k: int) -> None:
    qp_all = wcol.passage_encoder.encode_query(QUERIES)
    for expr in _filters(wcol):
        allowed = compile_filter(wcol, expr)
        for text, qp in zip(QUERIES, qp_all, strict=True):
            res = get_retriever("bm25", wcol).search(text, k, filter=expr)
            _check(res.hits, *ref_bm25(wcol, text, allowed, k), wcol)
            res = get_retriever("dense", wcol).search(text, k, filter=expr)
            _check(res.hits, *ref_dense(wcol, qp, allowed, k), wcol)
            assert len(res.hits) == min(k, allowed.n_passages)  # k come back whenever k match
            res = get_retriever("hybrid", wcol).search(text, k, filter=expr, fusion="rrf")
            _check(res.hits, *ref_hybrid(wcol, text, qp, allowed, k), wcol)


@pytest.mark.parametrize(("doc_stage", "alpha"), [("mean", 0.0), ("mean", 0.4), ("bm25", 0.0)])
def test_dhr_equals_the_reference(wcol: Collection, doc_stage: str, alpha: float) -> None:
    qp_all = wcol.passage_encoder.encode_query(QUERIES)
    dhr = get_retriever("dhr", wcol)
    for expr in _filters(wcol):
        allowed = compile_filter(wcol, expr)
        for text, qp in zip(QUERIES, qp_all, strict=True):
            res = dhr.search(text, 10, filter=expr, doc_stage=doc_stage, passage_alpha=alpha, lam=0.7, top_docs=8)
            _check(res.hits, *ref_dhr(wcol, text, qp, allowed, 10, 0.7, 8, alpha, doc_stage), wcol)


def test_torch_exact_path_gives_the_host_results(wcol: Collection) -> None:
    """The torch passage stage (a boolean device mask) and the exact scan's masked top k agree with numpy/FAISS."""
    exact = open_collection(wcol.root, device="cpu", dense_search="exact")
    assert exact.passage_backend == "torch"
    for expr in _filters(wcol):
        for method, params in (("dhr", {"doc_stage": "mean", "passage_alpha": 0.0}), ("dense", {}),
                               ("dhr", {"doc_stage": "hybrid-max"}), ("dhr-parallel", {"doc_stage": "mean"})):
            a = get_retriever(method, wcol).batch_search(QUERIES, 10, filter=expr, **params)
            b = get_retriever(method, exact).batch_search(QUERIES, 10, filter=expr, **params)
            for x, y in zip(a, b, strict=True):
                assert [h.passage_id for h in x.hits] == [h.passage_id for h in y.hits], (method, expr)
                np.testing.assert_allclose([h.score for h in x.hits], [h.score for h in y.hits], atol=1e-4)


@pytest.mark.parametrize("method", ["bm25", "dense", "hybrid", "dhr", "dhr-parallel", "bm25-dhr", "bm25-doc",
                                    "fetchhr"])
def test_every_hit_is_allowed_and_an_all_allowing_filter_changes_nothing(wcol: Collection, method: str) -> None:
    r = get_retriever(method, wcol)
    level = r.levels[0]
    plain = r.batch_search(QUERIES, 10, level)
    everything = r.batch_search(QUERIES, 10, level, filter="not id = nothing")
    for x, y in zip(plain, everything, strict=True):
        assert [(h.doc_id, h.passage_id) for h in x.hits] == [(h.doc_id, h.passage_id) for h in y.hits]
        np.testing.assert_allclose([h.score for h in x.hits], [h.score for h in y.hits], atol=1e-5)
    for expr in _filters(wcol):
        allowed = compile_filter(wcol, expr)
        ok_docs = {d.id for d in wcol.docs_at(allowed.doc_positions)}
        ok_passages = {p.id for p in wcol.passages_at(allowed.passage_positions)}
        for res in r.batch_search(QUERIES, 10, level, filter=expr):
            step = next(s for s in res.trace if s.name == "filter")
            assert step.detail["documents"] == allowed.n_docs and step.detail["filter"] == allowed.expr
            assert all(h.doc_id in ok_docs for h in res.hits)
            assert all(h.passage_id in ok_passages for h in res.hits if level == "passage")


def test_a_filter_matching_nothing_is_an_empty_list_with_a_note(wcol: Collection) -> None:
    res = get_retriever("dhr", wcol).search("anything at all", 10, filter="year > 3000")
    assert res.hits == []
    assert "allows nothing" in next(s for s in res.trace if s.name == "filter").detail["note"]


def test_a_method_that_cannot_filter_refuses(wcol: Collection) -> None:
    """Every registered method filters; one that declares it cannot is refused in one line, never post-filtered."""
    from hiera.retrieve.bm25 import Bm25Retriever

    class Unfiltered(Bm25Retriever):
        filters = False

    with pytest.raises(BadInputError, match="bm25 cannot search with a filter yet"):
        Unfiltered(wcol).search("a question", 5, filter="year > 2000")
    assert Unfiltered(wcol).search("television series", 5).hits  # without a filter it searches as ever
