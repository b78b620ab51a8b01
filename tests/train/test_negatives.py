"""Negative builders on the hand-made collection: the right source, never the answer."""

from __future__ import annotations

import random

import pytest
from helpers import tiny_questions

from hiera.errors import BadInputError
from hiera.eval.match import has_answer
from hiera.eval.questions import Question
from hiera.index.bm25 import Bm25Index
from hiera.train import negatives as neg
from hiera.train.examples import build_examples, check_kinds, choose_negatives, find_positive, judge_for


def _q(text: str, answer: str) -> Question:
    return Question("x", text, [answer])


def test_pool_is_aligned_with_the_index(col, pool):
    assert len(pool.passage_ids) == col.n_passages and len(pool.doc_ids) == col.n_docs
    first = col.passages_at([0, col.n_passages - 1])
    assert [p.id for p in first] == [pool.passage_ids[0], pool.passage_ids[-1]]
    for d in range(len(pool.doc_ids)):
        assert all(pool.passage_ids[i].startswith(pool.doc_ids[d] + "#") for i in pool.doc_passages(d))


def test_positive_prefers_gold_passage_then_bm25(col, pool):
    q = _q("Which eruption caused the year without a summer?", "Mount Tambora")
    pos, source = find_positive(pool, col.bm25_passages, q)
    assert source == "bm25" and pool.passage_ids[pos] == "volcanoes#5"
    # A gold passage wins when it holds the answer; one without the answer is ignored.
    q_gold = Question("g", "ash clouds and aircraft", ["Mount Tambora"], gold_passages={"volcanoes#5"})
    assert find_positive(pool, col.bm25_passages, q_gold) == (pool.passage_position["volcanoes#5"], "gold")
    q_bad_gold = Question("g", q.text, ["Mount Tambora"], gold_passages={"chess#1"})
    assert find_positive(pool, col.bm25_passages, q_bad_gold)[1] == "bm25"
    assert find_positive(pool, col.bm25_passages, _q("volcano eruption", "no such answer anywhere")) is None


def test_in_doc_negatives_same_document_without_answer(col, pool):
    q = _q("Which shield volcano in Hawaii has gentle slopes?", "Mauna Loa")
    pos, _ = find_positive(pool, col.bm25_passages, q)
    got = neg.in_doc(pool, judge_for(pool, q), pos, 10, random.Random(0))
    assert got and pos not in got
    assert {pool.passage_doc[i] for i in got} == {pool.passage_doc[pos]}
    assert not any(has_answer(q.answers, pool.passage_text[i]) for i in got)
    assert (
        len(got) == len(pool.doc_passages(int(pool.passage_doc[pos]))) - 1
    )  # every other passage of the doc


def test_in_sec_negatives_same_section_without_answer(col, pool):
    q = _q("Which eruption caused the year without a summer?", "Mount Tambora")
    pos, _ = find_positive(pool, col.bm25_passages, q)
    got = neg.in_sec(pool, judge_for(pool, q), pos, 10, random.Random(0))
    assert [pool.passage_ids[i] for i in got] == ["volcanoes#6"]  # the other half of "Eruptions"
    # A section with a single passage gives none.
    q2 = _q("Which computer defeated Kasparov?", "Deep Blue")
    pos2, _ = find_positive(pool, col.bm25_passages, q2)
    assert neg.in_sec(pool, judge_for(pool, q2), pos2, 10, random.Random(0)) == []


def test_in_sec_skips_passages_that_hold_the_answer(col, pool):
    # "ash" occurs in both Eruptions passages: the section has no negative left.
    q = _q("explosive eruption pumice tephra", "ash")
    pos = pool.passage_position["volcanoes#5"]
    assert neg.in_sec(pool, judge_for(pool, q), pos, 10, random.Random(0)) == []


def test_bm25_negatives_ranked_and_without_answer(col, pool):
    q = _q("volcano lava eruption ash magma", "Mauna Loa")
    pos = pool.passage_position["volcanoes#3"]
    got = neg.bm25_passages(col.bm25_passages, q.text, judge_for(pool, q), pos, 3)
    ranked, _ = col.bm25_passages.search(q.text, 100)
    expected = [
        int(i) for i in ranked if int(i) != pos and not has_answer(q.answers, pool.passage_text[int(i)])
    ][:3]
    assert got == expected and len(got) == 3


def test_abstract_negatives_are_documents_whose_full_text_lacks_the_answer(col, pool):
    summaries = Bm25Index.build(pool.doc_summary)
    q = _q("chess board game pieces volcano", "Deep Blue")
    judge = judge_for(pool, q)
    pdoc = pool.doc_position["chess"]
    got = neg.bm25_docs(summaries, q.text, judge, pdoc, 5)
    assert got and pdoc not in got
    assert not any(pool.doc_has(d, q.answers) for d in got)
    assert pool.doc_position["volcanoes"] in got


def test_build_examples_reports_and_drops(col, pool):
    qs = [*tiny_questions(), _q("nothing", "zzyzx unknown answer")]
    exs, report = build_examples(
        col, pool, qs, "passage", ["in-batch", "bm25", "in-doc", "in-sec"], progress=False
    )
    assert report.questions == len(qs) and report.kept == len(qs) - 1 and report.dropped == 1
    for ex in exs:
        assert set(ex.negatives) == {"bm25", "in-doc", "in-sec"}
        for kind, lst in ex.negatives.items():
            assert ex.positive_passage not in lst, kind
            assert not any(has_answer(ex.answers, pool.passage_text[i]) for i in lst), kind
    docs, _ = build_examples(col, pool, tiny_questions(), "doc", ["abstract", "all-text"], progress=False)
    for ex in docs:
        pdoc = ex.positive(pool, "doc")
        for lst in ex.negatives.values():
            assert pdoc not in lst and not any(pool.doc_has(d, ex.answers) for d in lst)


def test_choose_negatives_takes_kinds_in_turn_and_fills(col, pool):
    exs, _ = build_examples(
        col, pool, tiny_questions()[:1], "passage", ["bm25", "in-doc", "in-sec"], progress=False
    )
    ex = exs[0]
    got = choose_negatives(ex, pool, "passage", ["bm25", "in-doc", "in-sec"], 3, random.Random(1))
    assert len(got) == len(set(got)) == 3 and ex.positive_passage not in got
    firsts = {lst[0] for lst in ex.negatives.values() if lst}
    assert firsts <= set(got)  # the best of every kind comes first
    many = choose_negatives(ex, pool, "passage", ["in-sec"], 5, random.Random(1))  # in-sec has 1: rest random
    assert len(many) == 5 and ex.negatives["in-sec"][0] in many
    assert not any(has_answer(ex.answers, pool.passage_text[i]) for i in many)


def test_check_kinds_rejects_unknown_and_wrong_level():
    assert check_kinds("passage", ["in-batch", "bm25", "bm25"]) == ["in-batch", "bm25"]
    with pytest.raises(BadInputError, match="valid: in-batch, abstract"):
        check_kinds("doc", ["in-sec"])
    with pytest.raises(BadInputError, match="unknown level"):
        check_kinds("section", ["bm25"])
    with pytest.raises(BadInputError):
        check_kinds("passage", [])
