"""Title normalization: what two spellings of one name must agree on."""

from __future__ import annotations

from hiera.link.normalize import base_name, normalize


def test_normalize_folds_case_accents_punctuation_and_articles() -> None:
    assert normalize("Beyoncé") == normalize("BEYONCE") == "beyonce"
    assert normalize("Kiss & Tell!") == normalize("kiss and tell") == "kiss and tell"
    assert normalize("The Beatles") == "beatles"
    assert base_name("Kiss and Tell (1945 film)") == "Kiss and Tell"
    assert base_name("(film)") == "(film)"  # nothing left: keep the title
