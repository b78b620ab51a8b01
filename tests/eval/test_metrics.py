"""Each metric against small hand-computed examples."""

from __future__ import annotations

import math

import pytest

from hiera.errors import BadInputError
from hiera.eval.metrics import (
    doc_topk,
    latency_percentiles,
    mrecall_at_k,
    ranking_metrics,
    recall_at_k,
    set_metrics,
    topk_accuracy,
)


class TestTopk:
    def test_hand_computed(self) -> None:
        hits = [
            [True, False, False],  # first hit at rank 1
            [False, False, True],  # rank 3
            [False, False, False],  # none
            [],  # no results at all
        ]
        assert topk_accuracy(hits, ks=(1, 2, 3, 100)) == {
            "top1": 0.25,
            "top2": 0.25,
            "top3": 0.5,
            "top100": 0.5,
        }

    def test_bad_input(self) -> None:
        with pytest.raises(BadInputError):
            topk_accuracy([], ks=(1,))
        with pytest.raises(BadInputError):
            topk_accuracy([[True]], ks=(0,))

    def test_doc_topk_counts_distinct_documents(self) -> None:
        ranked = [
            ["A", "A", "A", "B"],  # B is the 2nd distinct document although 4th passage
            ["C", "D"],
            ["E"],
        ]
        gold = [{"B"}, {"C", "X"}, {"Z"}]
        assert doc_topk(ranked, gold, ks=(1, 2)) == {
            "doc_top1": pytest.approx(1 / 3),
            "doc_top2": pytest.approx(2 / 3),
        }

    def test_doc_topk_leaves_out_questions_without_gold(self) -> None:
        """A judged question with nothing relevant is out of the mean, as it is out of the ranking metrics'."""
        assert doc_topk([["A"], ["B"], ["C"]], [{"A"}, set(), {"X"}], ks=(1,)) == {"doc_top1": 0.5}
        with pytest.raises(BadInputError, match="no question has a gold"):
            doc_topk([["A"]], [set()], ks=(1,))

    def test_doc_topk_length_mismatch(self) -> None:
        with pytest.raises(BadInputError):
            doc_topk([["A"]], [{"A"}, {"B"}], ks=(1,))


class TestRankingMetrics:
    """All ranx cases in one test: the first ranx call pays numba's start-up."""

    def test_hand_computed(self) -> None:
        run = {
            "q1": {"a": 3.0, "b": 2.0, "c": 1.0},
            "q2": {"x": 5, "y": 4},  # ints are accepted
            "extra": {"a": 1.0},  # not judged: ignored
        }
        qrels = {
            "q1": {"b": 1, "c": 2, "z": 0},
            "q2": {"y": 1},
            "q3": {"w": 1},  # missing from the run: 0 everywhere
            "q4": {"v": 0},  # nothing relevant: left out of the means
        }
        m = ranking_metrics(run, qrels, ks=(1, 2, 3))
        # q1: rel b (rank 2, gain 1), c (rank 3, gain 2); q2: rel y at rank 2; q3: 0
        assert m["recall@1"] == pytest.approx(0.0)
        assert m["recall@2"] == pytest.approx((1 / 2 + 1 + 0) / 3)
        assert m["recall@3"] == pytest.approx((1 + 1 + 0) / 3)
        assert m["mrr@10"] == pytest.approx((1 / 2 + 1 / 2 + 0) / 3)
        dcg1 = 1 / math.log2(3) + 2 / math.log2(4)
        idcg1 = 2 / math.log2(2) + 1 / math.log2(3)
        ndcg2 = (1 / math.log2(3)) / 1.0
        assert m["ndcg@10"] == pytest.approx((dcg1 / idcg1 + ndcg2 + 0) / 3)
        ap1 = (1 / 2 + 2 / 3) / 2
        assert m["map@100"] == pytest.approx((ap1 + 1 / 2 + 0) / 3)
        assert set(m) == {"recall@1", "recall@2", "recall@3", "mrr@10", "ndcg@10", "map@100"}

        # ties keep the run's order, whatever ranx would do with equal scores
        first = ranking_metrics({"q": {"a": 1.0, "b": 1.0}}, {"q": {"a": 1}}, ks=(1,))
        second = ranking_metrics({"q": {"b": 1.0, "a": 1.0}}, {"q": {"a": 1}}, ks=(1,))
        assert first["recall@1"] == 1.0 and first["mrr@10"] == 1.0
        assert second["recall@1"] == 0.0 and second["mrr@10"] == 0.5

        # an empty run scores 0 without calling ranx on nothing
        assert ranking_metrics({}, {"q": {"a": 1}}, ks=(5,)) == {
            "recall@5": 0.0,
            "mrr@10": 0.0,
            "ndcg@10": 0.0,
            "map@100": 0.0,
        }

    def test_bad_input(self) -> None:
        with pytest.raises(BadInputError, match="relevant"):
            ranking_metrics({"q": {"a": 1.0}}, {"q": {"a": 0}})
        with pytest.raises(BadInputError, match="nan"):
            ranking_metrics({"q": {"a": float("nan")}}, {"q": {"a": 1}})
        with pytest.raises(BadInputError, match="not a number"):
            ranking_metrics({"q": {"a": "high"}}, {"q": {"a": 1}})  # type: ignore[dict-item]


class TestQuestSetMetrics:
    def test_hand_computed_with_templates(self) -> None:
        gold = {"q1": {"A", "B"}, "q2": {"C"}, "q3": {"D", "E", "F", "G"}, "q4": {"H"}}
        pred = {
            "q1": {"A", "X"},  # tp 1: p 1/2, r 1/2, f 1/2
            "q2": {"C"},  # perfect
            "q3": set(),  # empty prediction: all 0 (precision is 0, not 1)
            # q4 missing from pred: counts as empty
        }
        templates = {"q1": "_ and _", "q2": "_", "q3": "_ and _"}
        m = set_metrics(pred, gold, templates)
        assert m["avg_precision"] == pytest.approx((0.5 + 1 + 0 + 0) / 4)
        assert m["avg_recall"] == pytest.approx((0.5 + 1 + 0 + 0) / 4)
        assert m["avg_f1"] == pytest.approx((0.5 + 1 + 0 + 0) / 4)
        assert m["count"] == 4
        bt = m["by_template"]
        assert set(bt) == {"_ and _", "_", "(none)"}
        assert bt["_ and _"]["avg_f1"] == pytest.approx(0.25) and bt["_ and _"]["count"] == 2
        assert bt["_"]["avg_precision"] == 1.0

    def test_precision_and_recall_differ(self) -> None:
        # tp 1 of 4 predicted and 1 of 2 gold: p 1/4, r 1/2, f = 2*(1/8)/(3/4) = 1/3
        m = set_metrics({"q": {"A", "X", "Y", "Z"}}, {"q": {"A", "B"}})
        assert (m["avg_precision"], m["avg_recall"]) == (0.25, 0.5)
        assert m["avg_f1"] == pytest.approx(1 / 3)
        assert m["by_template"] == {}

    def test_empty_gold_is_an_error(self) -> None:
        with pytest.raises(BadInputError, match="empty gold"):
            set_metrics({}, {"q": set()})

    def test_recall_and_mrecall(self) -> None:
        gold = {"q1": {"A", "B"}, "q2": {"C"}, "q3": {"D", "E"}}
        ranked = {
            "q1": ["A", "X", "B"],
            "q2": ["X", "Y", "C"],
            "q3": ["D"],
        }
        r = recall_at_k(ranked, gold, ks=(1, 3))
        assert r["recall@1"] == pytest.approx((1 / 2 + 0 + 1 / 2) / 3)
        assert r["recall@3"] == pytest.approx((1 + 1 + 1 / 2) / 3)
        mr = mrecall_at_k(ranked, gold, ks=(1, 3))
        assert mr["mrecall@1"] == 0.0
        assert mr["mrecall@3"] == pytest.approx(2 / 3)
        assert set(recall_at_k(ranked, gold)) == {"recall@20", "recall@50", "recall@100", "recall@1000"}
        assert mrecall_at_k({}, {"q": {"A"}}, ks=(5,)) == {"mrecall@5": 0.0}


def test_latency_percentiles_linear() -> None:
    # sorted [1,2,3,4,10]: p50 = 3; p95 at position 0.95*4 = 3.8 -> 4 + 0.8*(10-4) = 8.8
    assert latency_percentiles([10, 1, 3, 2, 4]) == {
        "latency_ms_p50": 3.0,
        "latency_ms_p95": pytest.approx(8.8),
    }
    assert latency_percentiles([7.5]) == {"latency_ms_p50": 7.5, "latency_ms_p95": 7.5}
    with pytest.raises(BadInputError):
        latency_percentiles([])
