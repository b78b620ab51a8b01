"""Text normalization shared across rooms: SQuAD answers (exact match, token F1) and name keys, hand-checked."""

from __future__ import annotations

import pytest

from hiera.text import base_name, exact_match, f1, name_key, squad_normalize


class TestSquadMetrics:
    def test_normalize(self) -> None:
        assert squad_normalize("The  Denver Broncos!") == "denver broncos"
        assert squad_normalize("an apple, a day") == "apple day"
        assert squad_normalize("theory") == "theory"  # articles only as whole words

    def test_exact_match(self) -> None:
        assert exact_match("the Broncos", ["Panthers", "Broncos."]) == 1.0
        assert exact_match("Denver Broncos", ["Broncos"]) == 0.0
        assert exact_match("x", []) == 0.0

    def test_f1_hand_computed(self) -> None:
        # 1 common token; precision 1/3, recall 1/1 -> F1 = 2*(1/3)/(4/3) = 0.5
        assert f1("Denver Broncos team", ["Broncos"]) == pytest.approx(0.5)
        # max over ground truths: "Denver Broncos" gives p=2/3, r=1 -> 0.8
        assert f1("Denver Broncos team", ["Broncos", "Denver Broncos"]) == pytest.approx(0.8)
        assert f1("Panthers", ["Broncos"]) == 0.0
        assert f1("the", ["a"]) == 0.0  # both normalize to nothing
        assert f1("x", []) == 0.0

    def test_f1_repeated_prediction_tokens_lower_precision(self) -> None:
        # pred "a b b", gold "b": common = 1 -> p=1/2 ("a" is an article, dropped), r=1 -> 2/3
        assert f1("a b b", ["b"]) == pytest.approx(2 / 3)


def test_name_keys_fold_case_accents_punctuation_and_articles() -> None:
    assert name_key("Beyoncé") == name_key("BEYONCE") == "beyonce"
    assert name_key("Kiss & Tell!") == name_key("kiss and tell") == "kiss and tell"
    assert name_key("The Beatles") == "beatles"
    assert base_name("Kiss and Tell (1945 film)") == "Kiss and Tell"
    assert base_name("(film)") == "(film)"  # nothing left: keep the title
