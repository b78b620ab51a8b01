"""The retriever contract, checked for every retriever in RETRIEVERS at every level it supports."""

from __future__ import annotations

import json

import helpers
import pytest

from hiera.collection import Collection
from hiera.corpus.tree import Passage
from hiera.errors import BadInputError
from hiera.retrieve import RETRIEVERS, Results, Retriever, get_retriever
from hiera.spec import MAX_K, MAX_QUERY_CHARS

LEVELS = ("passage", "doc")
CASES = [(name, level) for name in RETRIEVERS for level in LEVELS]
HIERARCHICAL = ("dhr", "dhr-parallel", "bm25-dhr")
BASE_IDS = [d.id for d in helpers.make_docs()]
QUERIES = [helpers.TOPIC_QUERIES[d] for d in BASE_IDS]
K = 5


def _supports(col: Collection, name: str, level: str) -> bool:
    return level in get_retriever(name, col).levels


@pytest.fixture(scope="module")
def batch_results(col: Collection) -> dict[tuple[str, str], list[Results]]:
    """Every (retriever, level) over the six topic queries, one batch each."""
    out = {}
    for name, level in CASES:
        if _supports(col, name, level):
            out[(name, level)] = get_retriever(name, col).batch_search(QUERIES, k=K, level=level)
    return out


def check_results(res: Results, col: Collection, store_passages: dict[str, Passage], name: str, level: str, k: int) -> None:
    docs = {d.id: d for d in col.store.iter_docs()}
    assert res.retriever == name and res.level == level
    assert len(res) <= k
    assert [h.rank for h in res] == list(range(1, len(res) + 1))
    scores = [h.score for h in res]
    assert scores == sorted(scores, reverse=True)
    assert res.trace and all(step.ms >= 0 for step in res.trace)
    json.dumps(res.to_dict())  # serializable as is (the CLI and the API print it)

    if level == "passage":
        ids = [h.passage_id for h in res]
        assert len(set(ids)) == len(ids)
        for h in res:
            p = store_passages[h.passage_id]
            assert isinstance(h.section_path, tuple)
            assert (h.doc_id, h.title, h.section_path, h.text) == (p.doc_id, p.doc_title, p.section_path, p.text)
            assert h.text
    else:
        ids = [h.doc_id for h in res]
        assert len(set(ids)) == len(ids)
        for h in res:
            d = docs[h.doc_id]
            assert h.title == d.title
            if h.passage_id is not None:  # the best supporting passage
                p = store_passages[h.passage_id]
                assert p.doc_id == h.doc_id
                assert isinstance(h.section_path, tuple) and h.section_path == p.section_path
                # evidence: the supporting passages, that one first (one, but for a set member's constraints)
                assert h.text == p.text and h.evidence[0] == p.id and len(set(h.evidence)) == len(h.evidence)
                assert h.evidence == [p.id] or h.support
            else:
                assert h.text == d.summary and h.section_path == ()

    for h in res:
        assert h.stages, "every hit explains its score"
        for stage_name, st in h.stages.items():
            if name == "hybrid" and level == "passage":
                # a passage found by one list only has rank 0 (and score 0) in the other
                assert st.rank >= 0 and (st.rank > 0 or st.score == 0.0), stage_name
            else:
                assert st.rank >= 1, stage_name
        assert h.reason()
    if name in HIERARCHICAL and level == "passage":
        lam = res.params["lam"]
        by_doc: dict[str, tuple[float, int]] = {}
        for h in res:
            assert {"doc", "passage"} <= set(h.stages)
            assert h.score == pytest.approx(h.stages["passage"].score + lam * h.stages["doc"].score, abs=1e-5)
            doc_stage = (round(h.stages["doc"].score, 6), h.stages["doc"].rank)
            # every passage of one document carries that document's stage score and rank
            assert by_doc.setdefault(h.doc_id, doc_stage) == doc_stage, (h.doc_id, by_doc[h.doc_id], doc_stage)


@pytest.mark.parametrize(("name", "level"), CASES)
def test_results_follow_the_contract(col, store_passages, batch_results, name: str, level: str) -> None:
    r = get_retriever(name, col)
    assert isinstance(r, Retriever)
    if level not in r.levels:
        with pytest.raises(BadInputError, match=level):
            r.search(QUERIES[0], k=K, level=level)
        return
    results = batch_results[(name, level)]
    assert [res.query for res in results] == QUERIES
    for res in results:
        check_results(res, col, store_passages, name, level, K)

    # batch_search == [search(q) for q]; the same query twice gives the same answer
    for i in (0, 3):
        single = r.search(QUERIES[i], k=K, level=level)
        again = r.search(QUERIES[i], k=K, level=level)
        key = [(h.passage_id, h.doc_id) for h in single]
        assert key == [(h.passage_id, h.doc_id) for h in again]
        assert [h.score for h in single] == [h.score for h in again]
        assert key == [(h.passage_id, h.doc_id) for h in results[i]]
        assert [h.score for h in single] == pytest.approx([h.score for h in results[i]], abs=1e-5)


@pytest.mark.parametrize(("name", "level"), CASES)
def test_k_is_respected(col, store_passages, name: str, level: str) -> None:
    r = get_retriever(name, col)
    if level not in r.levels:
        with pytest.raises(BadInputError, match="ranks docs, not passages"):
            r.search("volcano", k=1, level=level)
        return
    q = helpers.TOPIC_QUERIES["volcanoes"]
    one, three, every = r.batch_search([q], k=1, level=level)[0], r.search(q, k=3, level=level), r.search(q, k=MAX_K, level=level)
    assert len(one) == 1 and len(three) == 3
    assert one[0].doc_id == three[0].doc_id == every[0].doc_id == "volcanoes"
    total = col.n_passages if level == "passage" else col.n_docs
    assert len(every) <= total
    if name in ("dense", "dhr", "dhr-parallel") or (name == "hybrid" and level == "doc"):
        assert len(every) == total  # dense scores every passage (k1=100 covers all six documents)
    check_results(every, col, store_passages, name, level, MAX_K)


@pytest.mark.parametrize("name", ["bm25", "dense", "dhr", "hybrid", "dhr-parallel", "bm25-dhr", "bm25-doc"])
def test_a_topic_query_finds_its_document_first(batch_results, name: str) -> None:
    for level in LEVELS:
        if (name, level) not in batch_results:
            continue
        top = [res[0].doc_id for res in batch_results[(name, level)]]
        assert top == BASE_IDS, (name, level)


def test_section_query_finds_the_section(col) -> None:
    q = "shield volcanoes with broad gentle slopes of basaltic lava"
    for name in ("bm25", "dense", "dhr", "hybrid"):
        hit = get_retriever(name, col).search(q, k=1)[0]
        assert hit.passage_id is not None
        assert hit.section_path == ("Types of volcanoes", "Shield volcanoes"), name
        assert hit.breadcrumb() == "Volcanoes › Types of volcanoes › Shield volcanoes"


@pytest.mark.parametrize("name", RETRIEVERS)
def test_queries_without_known_words_do_not_fail(col, store_passages, name: str) -> None:
    r = get_retriever(name, col)
    extra = [{"fusion": "interp"}] if name == "hybrid" else []
    for params in [{}, *extra]:
        for level in r.levels:
            results = r.batch_search(["zzqxv wwkkj", "the and of"], k=K, level=level, **params)
            for res in results:
                check_results(res, col, store_passages, name, level, K)
                if name.startswith("bm25"):
                    assert len(res) == 0  # BM25 returns only texts with a positive score
                else:
                    assert len(res) == K  # dense scores everything


@pytest.mark.parametrize("name", RETRIEVERS)
def test_bad_queries_and_k_are_refused(col, name: str) -> None:
    r = get_retriever(name, col)
    for q in ("", "   ", "\n\t", "x" * (MAX_QUERY_CHARS + 1)):
        with pytest.raises(BadInputError):
            r.search(q)
        with pytest.raises(BadInputError):
            r.batch_search(["fine query", q])
    for k in (0, -1, MAX_K + 1, 10**9, True, 2.5, "3"):
        with pytest.raises(BadInputError, match="k"):
            r.search("volcano", k=k)
    with pytest.raises(BadInputError, match="section"):
        r.search("volcano", level="section")


@pytest.mark.parametrize("name", RETRIEVERS)
def test_unknown_parameters_are_refused(col, name: str) -> None:
    r = get_retriever(name, col)
    with pytest.raises(BadInputError, match="no_such_param"):
        r.search("volcano", no_such_param=1)
    with pytest.raises(BadInputError, match="no_such_param"):
        get_retriever(name, col, no_such_param=1)
    # None means "use the default", as the CLI and the API pass it
    assert len(r.search("volcano", k=2, **{p.name: None for p in r.spec.params})) >= 1


@pytest.mark.parametrize(
    ("name", "params"),
    [
        ("dhr", {"lam": -1}),
        ("dhr", {"lam": "heavy"}),
        ("dhr", {"k1": 0}),
        ("dhr", {"k1": "many"}),
        ("dhr", {"doc_stage": "nope"}),
        ("dhr-parallel", {"depth": 0}),
        ("dhr-parallel", {"doc_stage": "fused2"}),
        ("bm25-dhr", {"k1": -3}),
        ("hybrid", {"fusion": "max"}),
        ("hybrid", {"alpha": 1.5}),
        ("bm25", {"doc_depth": -1}),
        ("dense", {"doc_depth": 0}),
        ("hybrid", {"depth": 0}),
    ],
)
def test_bad_parameter_values_are_refused(col, name: str, params: dict) -> None:
    key = next(iter(params))
    match = key  # the message names what is wrong, as the user spelled it
    with pytest.raises(BadInputError, match=match):
        get_retriever(name, col).search("volcano", **params)
    with pytest.raises(BadInputError, match=match):
        get_retriever(name, col, **params)


def test_unknown_retriever_lists_the_valid_names(col) -> None:
    with pytest.raises(BadInputError) as exc:
        get_retriever("bm26", col)
    msg = str(exc.value)
    assert "'bm26'" in msg
    for name in RETRIEVERS:
        assert name in msg


def test_parameters_change_the_answer(col) -> None:
    q = helpers.TOPIC_QUERIES["jazz"]
    dhr = get_retriever("dhr", col)
    assert {h.doc_id for h in dhr.search(q, k=20, k1=1)} == {"jazz"}
    assert len({h.doc_id for h in dhr.search(q, k=20, k1=3)}) == 3
    res = dhr.search(q, k=3, lam=0.0)
    assert [h.score for h in res] == pytest.approx([h.stages["passage"].score for h in res], abs=1e-6)
    assert res.params == {**dhr.defaults, "lam": 0.0}  # what was asked for, the retriever's defaults for the rest
    hy = get_retriever("hybrid", col, fusion="interp", alpha=1.0)
    dense = get_retriever("dense", col).search(q, k=3)
    assert [h.passage_id for h in hy.search(q, k=3)] == [h.passage_id for h in dense]


@pytest.mark.parametrize("name", ["bm25", "dense", "hybrid"])
def test_doc_level_returns_k_documents_when_the_first_passages_hold_fewer(col: Collection, name: str) -> None:
    """A passage search of depth 1 holds one document; the document ranking searches deeper until it has k, and
    ranks them as the best passage of each in the method's own full passage ranking does (max-passage)."""
    r = get_retriever(name, col)
    query = QUERIES[0]
    res = r.search(query, k=K, level="doc", doc_depth=1)
    full = r.search(query, k=col.n_passages, level="passage", depth=col.n_passages) if name == "hybrid" else \
        r.search(query, k=col.n_passages, level="passage")
    want = list(dict.fromkeys(h.doc_id for h in full))[:K]
    assert len(want) == K  # the collection has K documents with a matching passage
    assert [h.doc_id for h in res] == want
    assert max(s.detail["depth"] for s in res.trace if "depth" in s.detail) > 1  # it did search deeper


def test_provenance_names_only_what_the_method_used(col: Collection) -> None:
    """``answered-by``: BM25-only methods name no dense search or FAISS index; only DHR's serial methods (which run
    the passage-stage primitive) name its backend."""
    seen = {}
    for name in ("bm25", "bm25-doc", "bm25-dhr", "dense", "hybrid", "dhr", "dhr-parallel"):
        level = "passage" if "passage" in get_retriever(name, col).levels else "doc"
        res = get_retriever(name, col).search(QUERIES[1], k=3, level=level)
        seen[name] = {s.name: s.detail for s in res.trace}["answered-by"]
    for name in ("bm25", "bm25-doc", "bm25-dhr"):
        assert "dense_search" not in seen[name] and set(seen[name]["index"].values()) == {"bm25"}, seen[name]
    for name in ("dense", "hybrid", "dhr", "dhr-parallel"):
        assert seen[name]["dense_search"] == col.placement.dense_search and seen[name]["index"] == col.faiss_types
    assert {n for n, d in seen.items() if "passage_stage" in d} == {"dhr", "bm25-dhr"}
    assert seen["dhr"]["passage_stage"] == col.passage_backend
    assert seen["bm25-dhr"]["index"] == {"doc": "bm25", "passage": "bm25"}
    for name in ("dhr", "bm25-dhr"):  # at document level the passage stage does not run, and is not named
        res = get_retriever(name, col).search(QUERIES[1], k=3, level="doc")
        steps = {s.name: s.detail for s in res.trace}
        assert "passage-stage" not in steps and "passage_stage" not in steps["answered-by"], steps
    assert {s.name: s.detail for s in get_retriever("bm25-dhr", col).search(
        QUERIES[1], k=3, level="doc").trace}["answered-by"]["index"] == {"doc": "bm25"}


def test_a_stage_that_missed_a_hit_says_so(col: Collection) -> None:
    """Hybrid fuses two lists; a hit only one found has rank 0 in the other, and its reason says it was not in that
    list rather than showing the placeholder score as if it were ranked."""
    res = get_retriever("hybrid", col).search(QUERIES[1], k=6, depth=2)
    missed = [(h, name) for h in res for name, s in h.stages.items() if s.rank == 0]
    assert missed  # a shallow depth: some hits were found by one list alone
    for h, name in missed:
        assert f"{name} not in its list" in h.reason() and "(#0)" not in h.reason()
    ranked = [(h, name, s) for h in res for name, s in h.stages.items() if s.rank > 0]
    assert all(f"{name} {s.score:.3f} (#{s.rank})" in h.reason() for h, name, s in ranked)


def test_provenance_of_a_method_whose_dense_part_the_build_lacks(bm25_root) -> None:
    """``sets`` uses dense candidates when the build has vectors; on a BM25-only build it names BM25 alone."""
    from hiera.builds import open_collection

    col = open_collection(bm25_root)
    res = get_retriever("sets", col).search("volcanoes and chess", k=3)
    where = {s.name: s.detail for s in res.trace}["answered-by"]
    assert "dense_search" not in where and where["index"] == {"doc": "bm25"}, where
