"""Training the set classifier: labels derived from set expressions, its arguments, units from real queries.

The command (``hiera train-classifier``, then ``hiera sets tune``) is tested in tests/cli/test_train.py.
"""

from __future__ import annotations

import pytest

from hiera.collection import Collection
from hiera.errors import BadInputError
from hiera.sets.expr import And, Atom, Diff, Or
from hiera.train.args import ClassifierArgs
from hiera.train.classifier import Labels, atom_labels, classifier_units

G = {"g1", "g2"}


def labels(expr, assign=None) -> dict[str, Labels]:
    return {a.text: lab for a, lab in atom_labels(expr, G, assign)}


def test_labels_follow_the_set_algebra() -> None:
    one = labels(Atom("A"))["A"]
    assert one.positives == G and one.universes == [G] and not one.negatives
    inter = labels(And((Atom("A"), Atom("B"))))
    assert all(lab.positives == G and not lab.universes for lab in inter.values())  # A ∩ B = G says A ⊇ G only
    diff = labels(Diff(And((Atom("A"), Atom("B"))), Atom("C")))
    assert diff["A"].positives == G and diff["C"].negatives == G and not diff["C"].positives
    union = labels(Or((Atom("A"), Atom("B"))))
    assert all(not lab.positives and lab.universes == [G] for lab in union.values())
    assigned = labels(Or((Atom("A"), Atom("B"))), assign=lambda node, docs: {1: {"g2"}})
    assert assigned["B"].positives == {"g2"} and not assigned["A"].positives
    lab = Labels(positives={"x", "y"}, negatives={"y"}, universes=[{"x", "y", "z"}])
    lab.clean()
    assert lab.positives == {"x"} and not lab.negatives and lab.outside("w") and not lab.outside("z")


def test_classifier_args_are_checked() -> None:
    with pytest.raises(BadInputError):
        ClassifierArgs(units="queries").check()
    with pytest.raises(BadInputError):
        ClassifierArgs(negatives=1).check()
    args = ClassifierArgs()
    assert args.check() is args  # the defaults pass, and check() hands the arguments on


def test_units_from_real_queries(quest: dict, quest_col: Collection) -> None:
    from hiera.sets.queries import load_set_queries

    units, stats = classifier_units(quest_col, load_set_queries(quest["queries"]))
    assert stats["queries"] == 5 and stats["gold_titles_missing"] == 0
    # the parser's texts: "mathematicians born in the 19th century", not the annotation's "born in the 19th century"
    assert "mathematicians born in the 19th century" in units
    assert units["chemists"].negatives and not units["chemists"].positives
    assert units["American physicists"].positives
    # a union's gold documents go to the alternative BM25 prefers (Turner to the English painters)
    assert quest_col.store.resolve_title("J. M. W. Turner") in units["English painters"].positives
    assert units["German architects"].kind == "query"  # a one-atom query is its own unit
