"""The rules decomposer: each multi-hop shape over spaCy's parse, and one-hop questions left whole."""

from __future__ import annotations

from hiera.link.decompose import BRIDGE
from hiera.link.rules import RulesDecomposer


def subs(d) -> list[str]:
    return [s.text for s in d.sub_questions]


def test_comparison_splits_the_alternatives(rules: RulesDecomposer) -> None:
    d = rules.decompose("Who was born first, Arthur Conan Doyle or Penelope Lively?")
    assert d.shape == "comparison"
    assert subs(d) == ["Who was born first, Arthur Conan Doyle?", "Who was born first, Penelope Lively?"]
    d = rules.decompose("Were Scott Derrickson and Ed Wood of the same nationality?")
    assert d.shape == "comparison" and len(d.sub_questions) == 2
    assert "Scott Derrickson" in subs(d)[0] and "Ed Wood" not in subs(d)[0] and "Ed Wood" in subs(d)[1]


def test_both_a_and_b(rules: RulesDecomposer) -> None:
    d = rules.decompose("Are both Cypress and Ajuga genera?")
    assert d.shape == "both"
    assert subs(d) == ["Are Cypress genera?", "Are Ajuga genera?"]


def test_conjunction_of_predicates_keeps_the_subject(rules: RulesDecomposer) -> None:
    d = rules.decompose("Who directed Jaws and produced Jurassic Park?")
    assert d.shape == "conjunction"
    assert subs(d) == ["Who directed Jaws?", "Who produced Jurassic Park?"]


def test_bridge_with_a_relative_clause(rules: RulesDecomposer) -> None:
    q = "What government position was held by the woman who portrayed Corliss Archer in the film Kiss and Tell?"
    d = rules.decompose(q)
    assert d.shape == "bridge"
    first, second = d.sub_questions
    assert first.text == "The woman who portrayed Corliss Archer in the film Kiss and Tell?" and not first.needs_bridge
    assert second.text == f"What government position was held by {BRIDGE}?"
    assert second.needs_bridge and second.answer_type == "PERSON"


def test_bridge_with_a_role_noun_and_of(rules: RulesDecomposer) -> None:
    d = rules.decompose("The director of the romantic comedy Big Stone Gap is based in what New York city?")
    assert d.shape == "bridge"
    assert subs(d) == ["The director of the romantic comedy Big Stone Gap?", f"{BRIDGE} is based in what New York city?"]
    assert d.sub_questions[1].answer_type == "PERSON"


def test_one_hop_questions_are_not_split(rules: RulesDecomposer) -> None:
    for q in ("How many people live in Paris?", "When was the Eiffel Tower built?"):
        d = rules.decompose(q)
        assert d.shape == "none" and d.sub_questions == [] and d.texts() == []


def test_than_comparison_swaps_in_the_other_side(rules: RulesDecomposer) -> None:
    d = rules.decompose("Are more people today related to Genghis Khan than Julius Caesar?")
    assert d.shape == "comparison"
    assert subs(d) == ["Are more people today related to Genghis Khan?", "Are more people today related to Julius Caesar?"]


def test_temporal_asks_when_the_other_event_was(rules: RulesDecomposer) -> None:
    d = rules.decompose("Did the Titanic sink before the first World War began?")
    assert d.shape == "temporal"
    assert subs(d) == ["Did the Titanic sink?", "When was the first World War began?"]
