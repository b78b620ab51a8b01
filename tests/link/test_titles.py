"""The title and alias index: redirects, accents, punctuation, fuzzy and partial names, the link prior."""

from __future__ import annotations

from hiera.link.titles import TitleIndex

TITLES = ["Beyoncé", "Kiss and Tell (1945 film)", "Scott Derrickson", "Ed Wood", "Ed Wood (film)", "The Beatles"]


def index(**kw) -> TitleIndex:
    return TitleIndex(list(TITLES), **kw)


def titles(matches) -> list[str]:
    return sorted(TITLES[m.doc] for m in matches)


def test_exact_lookup_by_title_accents_and_qualifier() -> None:
    idx = index()
    assert titles(idx.exact("beyonce")) == ["Beyoncé"]
    assert titles(idx.exact("Kiss & Tell")) == ["Kiss and Tell (1945 film)"]
    [m] = idx.exact("Kiss & Tell")
    assert m.kind == "base" and m.via == "exact" and m.score == 1.0
    # "Ed Wood" names the person and, without its qualifier, the film: both are candidates
    assert titles(idx.exact("ed wood")) == ["Ed Wood", "Ed Wood (film)"]
    assert idx.exact("nobody at all") == []


def test_redirect_aliases_point_at_their_target() -> None:
    idx = index(aliases=[("Queen Bey", "Beyoncé"), ("Fab Four", "The Beatles"), ("Dangling", "No Such Page")])
    [m] = idx.exact("queen bey")
    assert TITLES[m.doc] == "Beyoncé" and m.kind == "alias" and m.name == "Queen Bey"
    assert titles(idx.exact("the fab four")) == ["The Beatles"]
    assert idx.exact("dangling") == []  # a redirect to a missing page links nothing


def test_fuzzy_lookup_finds_misspellings_but_not_unrelated_names() -> None:
    idx = index()
    found = idx.fuzzy("Scot Derickson")
    assert titles(found) == ["Scott Derrickson"]
    assert found[0].via == "fuzzy" and 0.88 <= found[0].score < 1.0
    assert idx.fuzzy("Scott Derrickson") == []  # the exact key is exact's job, not fuzzy's
    assert idx.fuzzy("Quentin Tarantino") == []


def test_bm25_over_names_finds_a_document_from_part_of_its_name() -> None:
    idx = index()
    found = idx.bm25("Derrickson", 3)
    assert found and TITLES[found[0].doc] == "Scott Derrickson" and found[0].score == 1.0


def test_prior_counts_in_links_and_is_flat_without_them() -> None:
    assert not index().has_prior and float(index().prior.max()) == 0.0
    idx = index(links=[["Ed Wood", "Beyoncé"], ["Ed Wood"], ["Ed Wood", "Ed Wood"]])
    assert idx.has_prior
    p = dict(zip(TITLES, idx.prior.tolist(), strict=True))
    assert p["Ed Wood"] == 1.0 > p["Beyoncé"] > p["Scott Derrickson"] == 0.0
