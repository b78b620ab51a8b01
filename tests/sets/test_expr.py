from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hiera.errors import BadInputError
from hiera.sets.expr import (
    QUEST_TEMPLATES,
    And,
    Atom,
    Diff,
    Exclusion,
    Or,
    atoms,
    constraints,
    evaluate,
    evaluate_trace,
    from_json,
    from_template,
    marked_atoms,
    template,
    to_infix,
    to_json,
)

A, B, C, D = Atom("a"), Atom("b"), Atom("c"), Atom("d")


# --- structure -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "expr, tpl",
    [
        (A, "_"),
        (Or([A, B]), "_ or _"),
        (Or([A, B, C]), "_ or _ or _"),
        (And([A, B]), "_ that are also _"),
        (And([A, B, C]), "_ that are also both _ and _"),
        (Diff(A, B), "_ that are not _"),
        (Diff(And([A, B]), C), "_ that are also _ but not _"),
    ],
)
def test_quest_templates(expr, tpl):
    assert template(expr) == tpl
    assert tpl in QUEST_TEMPLATES


def test_other_shapes_get_compositional_strings_outside_quest():
    odd = {
        template(Or([A, B, C, D])): "_ or _ or _ or _",
        template(Diff(Or([A, B]), C)): "(_ or _) that are not _",
        template(And([A, Or([B, C])])): "_ that are also (_ or _)",
        template(Diff(A, Or([B, C]))): "_ that are not (_ or _)",
        template(And([A, B, C, D])): "_ that are also _ and _ and _",
    }
    for got, want in odd.items():
        assert got == want and got not in QUEST_TEMPLATES


@pytest.mark.parametrize("tpl", QUEST_TEMPLATES)
def test_from_template_round_trips(tpl):
    texts = [f"atom {i}" for i in range(tpl.count("_"))]
    expr = from_template(tpl, texts)
    assert template(expr) == tpl
    assert constraints(expr) == texts


def test_from_template_errors():
    with pytest.raises(BadInputError, match="needs 2 atoms, got 1"):
        from_template("_ or _", ["x"])
    with pytest.raises(BadInputError, match="unknown QUEST template"):
        from_template("_ and _", ["x", "y"])


def test_marked_atoms():
    oq = "<mark>Birds of Chile</mark> that are also <mark>Birds  of Peru</mark> but not <mark>Owls</mark>"
    assert marked_atoms(oq) == ["Birds of Chile", "Birds of Peru", "Owls"]
    assert marked_atoms("no marks") == []


def test_atoms_spans_and_validation():
    a = Atom("Dutch war films", ((0, 5), (15, 24)))
    assert a.extent == (0, 24) and Atom("x").extent is None
    assert atoms(Diff(And([A, B]), A)) == [A, B, A]
    assert constraints(Diff(And([A, B]), A)) == ["a", "b"]
    with pytest.raises(BadInputError):
        Atom("  ")
    with pytest.raises(BadInputError):
        Atom("x", ((5, 2),))
    with pytest.raises(BadInputError, match="at least two"):
        And([A])
    with pytest.raises(BadInputError):
        Or([A, "b"])  # type: ignore[list-item]


def test_json_round_trip_and_errors():
    expr = Diff(And([Atom("Epic films", ((0, 10),)), Atom("films about Christianity", ((5, 29),))]), Atom("x"))
    data = to_json(expr)
    assert data == {
        "op": "diff",
        "left": {
            "op": "and",
            "children": [
                {"op": "atom", "text": "Epic films", "span": [[0, 10]]},
                {"op": "atom", "text": "films about Christianity", "span": [[5, 29]]},
            ],
        },
        "right": {"op": "atom", "text": "x", "span": []},
    }
    assert from_json(data) == expr
    for bad in ([], {"op": "xor"}, {"op": "and", "children": "ab"}, {"op": "atom", "text": ""}):
        with pytest.raises(BadInputError):
            from_json(bad)


def test_to_infix():
    assert to_infix(Diff(And([A, B]), Or([C, D]))) == "([a] ∩ [b]) \\ ([c] ∪ [d])"


# --- evaluation --------------------------------------------------------------------------------


def test_combined_scores_min_max_and_difference():
    members = {
        "a": {"d1": 0.9, "d2": 0.6, "d3": 0.8, "d4": 0.99},
        "b": {"d1": 0.7, "d2": 0.95, "d5": 0.5},
        "c": {"d4": 0.6},
    }
    assert evaluate(And([A, B]), members) == {"d1": 0.7, "d2": 0.6}  # min
    assert evaluate(Or([A, B]), members) == {"d1": 0.9, "d2": 0.95, "d3": 0.8, "d4": 0.99, "d5": 0.5}  # max
    # d4 is accepted by c, so it is excluded however sure a is; the others keep a·(1 − 0) = a
    assert evaluate(Diff(A, C), members) == {"d1": 0.9, "d2": 0.6, "d3": 0.8}


def test_difference_score_uses_subthreshold_scores_of_the_subtracted_side():
    members = {"a": {"d1": 0.9, "d2": 0.8, "d3": 0.5}, "c": {"d3": 0.7}}
    # c's classifier scored d1 at 0.4 (below its threshold: not a member) and never saw d2
    candidates = {"c": {"d1": 0.4, "d3": 0.7}}
    got = evaluate(Diff(A, C), members, candidates)
    assert got == pytest.approx({"d1": 0.9 * 0.6, "d2": 0.8})  # d3 is a member of c: excluded
    res = evaluate_trace(Diff(A, C), members, candidates)
    assert [d for d, _ in res.ranked()] == ["d2", "d1"]  # the doubt about d1 lowers its rank
    assert res.excluded == {"d3": [Exclusion("c", "negated", 0.7)]}


def test_trace_names_the_excluding_constraint():
    members = {
        "a": {"in-all": 0.9, "only-a": 0.8, "a-and-b": 0.7},
        "b": {"in-all": 0.6, "a-and-b": 0.9, "only-b": 0.9},
        "c": {"in-all": 0.9, "only-c": 0.9},
    }
    res = evaluate_trace(Diff(And([A, B]), C), members, {"b": {"only-a": 0.3}})
    assert res.scores == {"a-and-b": 0.7}
    assert res.excluded == {
        "in-all": [Exclusion("c", "negated", 0.9)],
        "only-a": [Exclusion("b", "missing", 0.3)],
        "only-b": [Exclusion("a", "missing", None)],
        # only-c is a member of the subtracted side only: never a candidate, not listed
    }
    res = evaluate_trace(Diff(A, Or([B, C])), members)
    assert res.excluded["in-all"] == [Exclusion("b", "negated", 0.6), Exclusion("c", "negated", 0.9)]
    assert res.excluded["a-and-b"] == [Exclusion("b", "negated", 0.9)]


def test_empty_sets_and_bad_tables():
    members = {"a": {"d1": 0.9}, "b": {}}
    assert evaluate(And([A, B]), members) == {}  # an empty side empties an intersection
    assert evaluate(Or([A, B]), members) == {"d1": 0.9}
    assert evaluate(Diff(B, A), members) == {}
    with pytest.raises(BadInputError, match="no member set for constraint 'c'"):
        evaluate(And([A, C]), members)
    with pytest.raises(BadInputError, match=r"must be a number in \[0, 1\]"):
        evaluate(A, {"a": {"d1": 1.5}})
    with pytest.raises(BadInputError, match=r"must be a number in \[0, 1\]"):
        evaluate(A, {"a": {"d1": 0.5}}, {"a": {"d1": float("nan")}})


# --- set algebra against Python sets (property test) -----------------------------------------

DOCS = [f"d{i}" for i in range(8)]
NAMES = ["a", "b", "c", "d"]


def _exprs() -> st.SearchStrategy:
    leaves = st.sampled_from(NAMES).map(Atom)

    def grow(children: st.SearchStrategy) -> st.SearchStrategy:
        return st.one_of(
            st.lists(children, min_size=2, max_size=3).map(And),
            st.lists(children, min_size=2, max_size=3).map(Or),
            st.tuples(children, children).map(lambda lr: Diff(*lr)),
        )

    return st.recursive(leaves, grow, max_leaves=6)


def _python_sets(expr, sets: dict[str, set[str]]) -> set[str]:
    if isinstance(expr, Atom):
        return set(sets[expr.text])
    if isinstance(expr, And):
        return set.intersection(*(_python_sets(c, sets) for c in expr.children))
    if isinstance(expr, Or):
        return set.union(*(_python_sets(c, sets) for c in expr.children))
    return _python_sets(expr.left, sets) - _python_sets(expr.right, sets)


_tables = st.fixed_dictionaries(
    {n: st.dictionaries(st.sampled_from(DOCS), st.floats(0.0, 1.0, allow_nan=False), max_size=6) for n in NAMES}
)


@settings(max_examples=150, deadline=None)
@given(expr=_exprs(), members=_tables, candidates=_tables)
def test_membership_matches_python_set_algebra(expr, members, candidates):
    sets = {n: set(t) for n, t in members.items()}
    res = evaluate_trace(expr, members, candidates)
    assert set(res.scores) == _python_sets(expr, sets)
    assert all(0.0 <= s <= 1.0 for s in res.scores.values())
    # every excluded candidate was accepted by some atom, is not a member, and has a reason
    assert not set(res.excluded) & set(res.scores)
    assert all(reasons for reasons in res.excluded.values())
    # scores never exceed the member's best score in a positive atom
    for doc, s in res.scores.items():
        assert s <= max(members[n].get(doc, 0.0) for n in NAMES) + 1e-12
