"""Lead coverage (the lexical evidence ``sets`` blends into the classifier) and evidence sentences."""

from __future__ import annotations

import pytest

from hiera.index.bm25 import Bm25Index
from hiera.sets.lexical import LeadMatcher, best_sentence, lead_text, split_sentences, time_spans

LEADS = {
    "Japan": "Japan. Japan is an island country in East Asia.",
    "Kyrgyzstan": "Kyrgyzstan. Kyrgyzstan is a landlocked country in Central Asia.",
    "Sweden": "Sweden. Sweden is a Nordic country in Northern Europe.",
    "Ibsen": "Henrik Ibsen. Henrik Ibsen was a Norwegian playwright whose A Doll's House premiered in 1879.",
    "Fosse": "Jon Fosse. Jon Fosse is a Norwegian playwright who won the Nobel Prize in 2023.",
    "Pulp Fiction": "Pulp Fiction. Pulp Fiction is a 1994 American crime film.",
}


@pytest.fixture(scope="module")
def matcher() -> LeadMatcher:
    idx = Bm25Index.build(list(LEADS.values()))
    return LeadMatcher(idx.analyzer, idx.df, idx.size)


def cover(m: LeadMatcher, constraint: str, doc: str) -> float:
    lead = LEADS[doc]
    return m.coverage(m.terms(constraint), m.lead_terms(lead), lead)


def test_bm25_document_frequencies() -> None:
    idx = Bm25Index.build(["a red car", "a red bus", "a blue car"])
    assert idx.df(idx.analyzer("red cars blue")) == [2, 2, 1]
    assert idx.df(["neverseen"]) == [0]


def test_coverage_is_the_idf_weighted_share_of_terms_the_lead_states(matcher: LeadMatcher) -> None:
    assert cover(matcher, "Countries in East Asia", "Japan") == pytest.approx(1.0)
    central, north = cover(matcher, "Countries in East Asia", "Kyrgyzstan"), cover(matcher, "Countries in East Asia", "Sweden")
    assert 1.0 > central > north > 0.0  # "country" and "Asia" / only "country"
    # "country" is in four of the six leads: it weighs less than a third of "countries in East Asia"
    assert north < 1 / 3
    assert cover(matcher, "Norwegian playwrights", "Ibsen") == pytest.approx(1.0)
    assert cover(matcher, "the of and", "Japan") == 0.0  # nothing but stop words: no evidence either way


def test_centuries_and_decades_are_satisfied_by_their_years(matcher: LeadMatcher) -> None:
    assert [(w, p.pattern) for w, p in time_spans("playwrights born in the 19th century")] == [
        (["19th", "century"], r"\b18\d\d\b")
    ]
    ibsen = cover(matcher, "Norwegian playwrights born in the 19th century", "Ibsen")
    fosse = cover(matcher, "Norwegian playwrights born in the 19th century", "Fosse")
    assert ibsen > fosse  # 1879 stands for "19th century"; 2023 does not
    assert cover(matcher, "1990s films", "Pulp Fiction") == pytest.approx(1.0)


def test_lead_text_is_the_title_and_first_sentence() -> None:
    body = "Sweden is a Nordic country. It borders Norway. St. Lucia is elsewhere."
    assert lead_text("Sweden", body) == "Sweden. Sweden is a Nordic country."
    assert lead_text("Empty", "") == "Empty"


def test_sentences_and_support_choice() -> None:
    text = "Yang Chen-Ning also known as C.N. Yang, was a physicist. He was born in 1922 in Hefei. St. Louis is a city."
    assert split_sentences(text) == [
        "Yang Chen-Ning also known as C.N. Yang, was a physicist.", "He was born in 1922 in Hefei.",
        "St. Louis is a city.",
    ]
    sents = split_sentences(text)
    assert best_sentence("physicists", sents) == 0
    assert best_sentence("physicists born in the 20th century", sents) == 1  # "born" and the year 19xx
    assert best_sentence("qqq", sents) == 0
