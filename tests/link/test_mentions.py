"""Mention spans on real HotpotQA questions."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hiera.link.mentions import MentionDetector
from hiera.link.nlp import SpacyModel


@pytest.fixture(scope="module")
def detector(nlp: SpacyModel) -> MentionDetector:
    return MentionDetector(nlp)


def test_spans_point_into_the_question(detector: MentionDetector) -> None:
    q = "What government position was held by the woman who portrayed Corliss Archer in the film Kiss and Tell?"
    found = detector.detect(q)
    for m in found:
        assert q[m.start : m.end] == m.text
    by_text = {m.text: m for m in found}
    assert by_text["Corliss Archer"].kind == "entity" and by_text["Corliss Archer"].label == "PERSON"
    assert "Kiss and Tell" in by_text  # a title with a lower-case connector
    assert by_text["Corliss Archer"].to_dict()["span"] == [q.index("Corliss"), q.index("Corliss") + len("Corliss Archer")]
    # no wh-word or bare determiner is a mention; a noun chunk loses its article
    assert not {"What", "who", "the woman"} & set(by_text)
    assert "woman" in by_text and by_text["woman"].kind == "noun-chunk"


def test_numbers_and_dates_are_not_mentions(detector: MentionDetector) -> None:
    found = detector.detect('Which 1945 film starred Shirley Temple in "Kiss and Tell" three times?')
    texts = {m.text for m in found}
    assert "Shirley Temple" in texts and "Kiss and Tell" in texts
    assert not {"1945", "three"} & texts


def test_real_hotpotqa_questions_have_their_entities_detected(detector: MentionDetector, data_dir: Path) -> None:
    """On the first 30 public questions, a supporting title that appears verbatim in the question is a mention."""
    path = data_dir / "hotpotqa" / "dev_subsampled.public250.jsonl"
    checked = found = 0
    with path.open(encoding="utf-8") as fh:
        for line, _ in zip(fh, range(30), strict=False):
            rec = json.loads(line)
            q = rec["question_text"]
            mentions = detector.detect(q)
            for m in mentions:
                assert q[m.start : m.end] == m.text
            for ctx in rec["contexts"]:
                title = ctx["title"]
                if ctx["is_supporting"] and title in q:
                    checked += 1
                    found += any(m.text == title or title in m.text for m in mentions)
    assert checked >= 10
    assert found / checked >= 0.8, (found, checked)


def test_a_question_without_names_still_has_noun_chunks_or_nothing(detector: MentionDetector) -> None:
    assert detector.detect("what is it?") == []
    assert {m.kind for m in detector.detect("which colour is the sky at noon?")} <= {"noun-chunk"}
