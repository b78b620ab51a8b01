"""The set planner's roles: what each constraint of a set expression is to the answer."""

from __future__ import annotations

from hiera.sets.expr import And, Atom, Diff, Or, from_json
from hiera.sets.plan import roles_of


def test_roles_and_expressions() -> None:
    e = Diff(And((Atom("a"), Atom("b"))), Or((Atom("c"), Atom("a"))))
    assert roles_of(e) == {"a": "positive", "b": "conjunct", "c": "negative"}
    assert roles_of(Atom("q"), decompose=False) == {"q": "query"}
    assert from_json({"op": "atom", "text": "x", "span": []}) == Atom("x")
