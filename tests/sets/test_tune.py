"""Threshold search (hiera sets tune) on toy score tables, and the thresholds file beside a classifier."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hiera.errors import BadInputError, HieraError
from hiera.sets.classifier import THRESHOLDS_FILE, Thresholds, read_thresholds, write_thresholds
from hiera.sets.expr import And, Atom, Diff, Expr, Or
from hiera.sets.plan import SetPlan, roles_of
from hiera.sets.tune import avg_f1, set_f1, thresholds_from, tune_blend, tune_thresholds


def plan(expr: Expr, scores: dict[str, dict[str, float]], decompose: bool = True) -> SetPlan:
    pool = list(dict.fromkeys(d for t in scores.values() for d in t))
    return SetPlan("q", expr, None, roles_of(expr, decompose), {}, pool, scores, "toy")


def test_set_f1_is_quests() -> None:
    assert set_f1(set(), {"a"}) == 0.0
    assert set_f1({"b"}, {"a"}) == 0.0
    assert set_f1({"a", "b"}, {"a"}) == pytest.approx(2 / 3)


def test_global_threshold_is_the_centre_of_the_best_plateau() -> None:
    plans = [
        plan(Atom("A"), {"A": {"d1": 0.9, "d2": 0.7, "d3": 0.3}}),
        plan(Diff(Atom("B"), Atom("C")), {"B": {"e1": 0.95, "e2": 0.9}, "C": {"e1": 0.6, "e2": 0.1}}),
    ]
    golds = [{"d1", "d2"}, {"e2"}]
    res = tune_thresholds(plans, golds, min_role_queries=5)
    assert res["mode"] == "global" and res["f1"] == pytest.approx(1.0)
    assert 0.3 < res["threshold"] <= 0.6  # every threshold in (0.3, 0.6] is perfect
    assert res["threshold"] == pytest.approx(0.46)  # the middle of 0.32 … 0.60
    assert avg_f1(plans, golds, {"positive": 0.8, "negative": 0.8}) < 1.0


def test_per_role_thresholds_when_a_difference_needs_its_own() -> None:
    # C must accept e1 at 0.4 (negative threshold <= 0.4) while D must reject c2 at 0.45 (positive > 0.45)
    plans = [
        plan(Diff(Atom("B"), Atom("C")), {"B": {"e1": 0.95, "e2": 0.9}, "C": {"e1": 0.4, "e2": 0.1}}),
        plan(Atom("D"), {"D": {"c1": 0.5, "c2": 0.45}}),
    ]
    golds = [{"e2"}, {"c1"}]
    res = tune_thresholds(plans, golds, min_role_queries=1)
    assert res["mode"] == "per-role" and res["f1"] == pytest.approx(1.0) and res["f1"] > res["f1_global"]
    assert 0.45 < res["by_role"]["positive"] <= 0.5 and res["by_role"]["negative"] <= 0.4
    # too few queries with a difference: the negative role keeps the global threshold
    res2 = tune_thresholds(plans, golds, min_role_queries=2)
    assert "negative" not in res2["by_role"] and res2["threshold"] <= 0.4
    assert tune_thresholds(plans, golds, min_role_queries=3)["mode"] == "global"


def test_conjunct_role_for_the_qualifiers_of_an_intersection() -> None:
    e = And((Atom("A"), Atom("B")))
    assert roles_of(e) == {"A": "positive", "B": "conjunct"}  # the set asked for, then what qualifies it
    assert roles_of(And((Atom("A"), Atom("B"), Atom("C")))) == {"A": "positive", "B": "conjunct", "C": "conjunct"}
    assert roles_of(Diff(e, Atom("C"))) == {"A": "positive", "B": "conjunct", "C": "negative"}
    assert roles_of(Or((e, Atom("B")))) == {"A": "positive", "B": "positive"}
    assert roles_of(Diff(Atom("A"), e)) == {"A": "positive", "B": "negative"}
    # B's probabilities run low (a constraint the text states indirectly): a lower conjunct threshold recovers it
    plans = [
        plan(e, {"A": {"x": 0.9, "y": 0.95}, "B": {"x": 0.55, "y": 0.1}}),
        plan(Atom("D"), {"D": {"c1": 0.9, "c2": 0.6}}),
    ]
    res = tune_thresholds(plans, [{"x"}, {"c1"}], min_role_queries=1)
    assert res["f1"] == pytest.approx(1.0) and res["by_role"]["conjunct"] <= 0.55 < res["by_role"]["positive"]


def test_query_role_for_undecomposed_plans_and_bad_input() -> None:
    plans = [plan(Atom("q one"), {"q one": {"a": 0.8, "b": 0.2}}, decompose=False)]
    res = tune_thresholds(plans, [{"a"}])
    assert res["mode"] == "query" and 0.2 < res["by_role"]["query"] <= 0.8
    with pytest.raises(BadInputError):
        tune_thresholds([], [])
    mixed = [*plans, plan(Or((Atom("x"), Atom("y"))), {"x": {"a": 0.9}, "y": {}})]
    with pytest.raises(BadInputError):
        tune_thresholds(mixed, [{"a"}, {"a"}])


def test_thresholds_file_round_trip_keeps_the_other_mode(tmp_path: Path) -> None:
    assert read_thresholds(tmp_path) is None
    dec = {"mode": "per-role", "threshold": 0.4, "by_role": {"positive": 0.5, "negative": 0.3}, "f1": 0.7, "queries": 9}
    write_thresholds(tmp_path, thresholds_from(dec, tmp_path, {"n": 9}))
    q = {"mode": "query", "by_role": {"query": 0.8}, "f1": 0.2, "queries": 9}
    write_thresholds(tmp_path, thresholds_from(q, tmp_path))
    th = read_thresholds(tmp_path)
    assert th is not None and th.source == "tuned" and th.threshold == 0.4
    assert th.by_role == {"positive": 0.5, "negative": 0.3, "query": 0.8}
    assert th.for_role("negative") == 0.3 and Thresholds(0.6).for_role("query") == 0.6
    # re-tuning the decomposed mode replaces its roles and keeps the query one
    write_thresholds(tmp_path, thresholds_from({**dec, "mode": "global", "by_role": {}}, tmp_path))
    assert read_thresholds(tmp_path).by_role == {"query": 0.8}
    (tmp_path / THRESHOLDS_FILE).write_text(json.dumps({"threshold": 2}))
    with pytest.raises(HieraError, match="threshold"):
        read_thresholds(tmp_path)
    (tmp_path / THRESHOLDS_FILE).write_text("{")
    with pytest.raises(HieraError, match="corrupt"):
        read_thresholds(tmp_path)


def test_lexical_blend_is_kept_only_when_it_helps(tmp_path: Path) -> None:
    base = plan(Atom("A"), {"A": {"d1": 0.6, "d2": 0.7}})  # the classifier prefers the wrong document
    base.lexical = {"A": {"d1": 1.0, "d2": 0.1}}  # BM25 prefers the right one
    assert base.blend(0.5).scores["A"] == {"d1": pytest.approx(0.8), "d2": pytest.approx(0.4)}
    assert base.blend(0.5).blend(0.0).scores == base.scores  # re-blending starts from the probabilities
    res = tune_blend([base], [{"d1"}])
    assert res["lexical_weight"] > 0 and res["f1"] == pytest.approx(1.0) and res["by_weight"][0.0] < 1.0
    plain = plan(Atom("A"), {"A": {"d1": 0.9, "d2": 0.1}})
    plain.lexical = {"A": {"d1": 0.1, "d2": 1.0}}
    assert tune_blend([plain], [{"d1"}])["lexical_weight"] == 0.0  # no gain: the probabilities stay
    write_thresholds(tmp_path, thresholds_from(res, tmp_path))
    assert read_thresholds(tmp_path).lexical_weight == {"decomposed": res["lexical_weight"]}


def test_thresholds_tuned_with_other_lexical_evidence_do_not_carry_over(tmp_path: Path) -> None:
    # a file from before lead coverage: a BM25 weight and roles, no lexical_evidence
    write_thresholds(tmp_path, Thresholds(0.7, {"negative": 0.9, "query": 0.6}, "tuned", {}, {"decomposed": 0.5}))
    assert not read_thresholds(tmp_path).evidence_matches()
    assert Thresholds(0.7, {}, "tuned", {}, {}).evidence_matches()  # blending nothing matches any evidence
    res = tune_thresholds([plan(Atom("A"), {"A": {"d1": 0.9, "d2": 0.2}})], [{"d1"}])
    write_thresholds(tmp_path, thresholds_from(res, tmp_path))
    saved = read_thresholds(tmp_path)
    assert saved.evidence_matches() and saved.meta["lexical_evidence"] == "lead-coverage"
    assert "query" not in saved.by_role and saved.lexical_weight == {"decomposed": 0.0}  # nothing of the old file


def test_the_set_asked_for_keeps_its_threshold_while_its_qualifier_is_lenient() -> None:
    # "A that are also B": A separates x from z clearly, B (a date the text rarely states) scores both low
    plans = [
        plan(And((Atom("A"), Atom("B"))), {"A": {"x": 0.9, "z": 0.6}, "B": {"x": 0.3, "z": 0.3}}),
        plan(Atom("D"), {"D": {"c1": 0.9, "c2": 0.6}}),
    ]
    golds = [{"x"}, {"c1"}]
    res = tune_thresholds(plans, golds, min_role_queries=1)
    assert res["f1"] == pytest.approx(1.0)
    assert res["by_role"]["conjunct"] <= 0.3 and 0.6 < res["by_role"]["positive"] <= 0.9
    # one threshold for both sides could not do it: B needs ≤ 0.3, A needs > 0.6
    assert max(avg_f1(plans, golds, {"positive": t, "conjunct": t}) for t in (0.2, 0.3, 0.5, 0.7, 0.9)) < 1.0
