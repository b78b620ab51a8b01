"""DPR answer matching, on hand-checked cases."""

from __future__ import annotations

import unicodedata

import pytest

from hiera.errors import BadInputError
from hiera.eval import match
from hiera.eval.match import has_answer, hit_list, passage_has_answer, tokenize
from hiera.results import Hit

COMPOSED = "Beyonc\u00e9"  # é as one code point
DECOMPOSED = "Beyonce\u0301"  # e + COMBINING ACUTE ACCENT


class TestTokenizer:
    def test_words_and_single_symbols(self) -> None:
        assert tokenize("The U.S. army, 1,000 men!") == [
            "the", "u", ".", "s", ".", "army", ",", "1", ",", "000", "men", "!",
        ]  # fmt: skip

    def test_nfd_keeps_the_accent_inside_the_token(self) -> None:
        # DPR normalizes to NFD; \p{M} is part of the word class, so the
        # combining accent stays in the token instead of being dropped.
        assert tokenize(COMPOSED) == ["beyonce\u0301"]
        assert tokenize(DECOMPOSED) == ["beyonce\u0301"]
        assert tokenize("Beyonce") == ["beyonce"]

    def test_whitespace_and_control_characters_separate_tokens(self) -> None:
        assert tokenize("New\nYork\tCity\u200bHall") == ["new", "york", "city", "hall"]


class TestStringMode:
    def test_contiguous_tokens_any_case(self) -> None:
        assert has_answer(["Denver Broncos"], "The DENVER broncos won Super Bowl 50.")
        assert not has_answer(["Denver Broncos"], "Denver beat the Broncos.")

    def test_whole_tokens_only(self) -> None:
        assert not has_answer(["four"], "Tesla was the fourth of five children.")
        assert not has_answer(["Bronco"], "The Broncos won.")

    def test_any_answer_suffices(self) -> None:
        assert has_answer(["Panthers", "Broncos"], "The Broncos won.")
        assert has_answer("Broncos", "The Broncos won.")  # a bare string is one answer

    def test_accents_match_across_compositions_but_are_not_stripped(self) -> None:
        assert has_answer([COMPOSED], f"{DECOMPOSED} released Lemonade.")
        assert has_answer([DECOMPOSED], f"{COMPOSED} released Lemonade.")
        assert not has_answer(["Beyonce"], f"{COMPOSED} released Lemonade.")
        assert not has_answer([COMPOSED], "Beyonce released Lemonade.")
        roentgen = unicodedata.normalize("NFC", "Wilhelm Conrad Röntgen")
        assert has_answer([roentgen], "In 1901 Wilhelm Conrad Röntgen won.")
        assert not has_answer([roentgen], "In 1901 Wilhelm Conrad Rontgen won.")

    def test_numbers_and_punctuation_are_tokens(self) -> None:
        assert has_answer(["1,000"], "about 1,000 people")
        assert has_answer(["1,000"], "about 1 , 000 people")  # same tokens: DPR ignores spacing
        assert not has_answer(["1,000"], "about 1000 people")
        assert has_answer(["U.S."], "the U.S. Army")
        assert has_answer(["Smith"], "Smith's house")
        assert has_answer(["May 18 , 2018"], "released on May 18, 2018 in")

    def test_empty_answer_never_matches(self) -> None:
        # Deliberate: DPR's loop would count an empty answer as found everywhere.
        assert not has_answer(["", "   "], "any text at all")

    def test_answer_tokenization_is_cached(self) -> None:
        match._answer_tokens.cache_clear()
        for _ in range(3):
            has_answer(["Denver Broncos"], "The Denver Broncos won.")
        info = match._answer_tokens.cache_info()
        assert info.misses == 1 and info.hits == 2


class TestRegexMode:
    def test_curated_trec_pattern(self) -> None:
        pat = r"20\s?,?\s?(32|40)0\s?-?\s?f(ee|oo)t|6,194-meter"
        assert has_answer([pat], "Mount McKinley is 20,320 feet tall.", "regex")
        assert has_answer([pat], "a 6,194-meter peak", "regex")
        assert not has_answer([pat], "it is 20,500 feet tall", "regex")

    def test_ignorecase_multiline_and_substring_search(self) -> None:
        assert has_answer(["After the Fall|Finishing the Play"], "he wrote AFTER THE FALL in 1964", "regex")
        assert has_answer(["^lawyer"], "Polk was\nLawyer by training", "regex")
        # a regex is searched in the raw text, not token-bounded
        assert has_answer(["four"], "the fourth child", "regex")

    def test_nfd_applies_to_pattern_and_text(self) -> None:
        assert has_answer([COMPOSED], f"{DECOMPOSED} sings", "regex")

    def test_invalid_regex_is_no_match(self) -> None:
        assert not has_answer(["(unclosed", "[z-a]"], "(unclosed [z-a]", "regex")
        assert has_answer(["(unclosed", "sings"], "she sings", "regex")

    def test_unknown_mode(self) -> None:
        with pytest.raises(BadInputError, match="match mode"):
            has_answer(["x"], "x", "fuzzy")  # type: ignore[arg-type]


class TestTitlesNeverCount:
    def test_answer_only_in_title_is_no_hit(self) -> None:
        hit = Hit(
            rank=1, score=1.0, doc_id="Denver_Broncos", title="Denver Broncos", text="They won in 2016."
        )
        assert not passage_has_answer(hit, ["Denver Broncos"])
        hit2 = Hit(
            rank=2,
            score=0.5,
            doc_id="Super_Bowl_50",
            title="Super Bowl 50",
            section_path=("Denver Broncos",),
            text="The Denver Broncos defeated the Carolina Panthers.",
        )
        assert passage_has_answer(hit2, ["Denver Broncos"])
        assert hit_list([hit, hit2], ["Denver Broncos"]) == [False, True]


def test_a_passage_is_tokenized_once_however_many_questions_check_it(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    real = match.tokenize
    monkeypatch.setattr(match, "tokenize", lambda text: calls.append(text) or real(text))
    text = "The Zeppelin-7731 line first flew in 1931 over Lake Constance."
    hit = Hit(rank=1, score=1.0, doc_id="z", title="Z", passage_id="z#0", text=text)
    for answers in (["1931"], ["Lake Constance"], ["1932"], ["Zeppelin-7731"]):
        assert match.hit_list([hit, hit], answers) == [answers[0] != "1932"] * 2
    assert calls.count(text) == 1
