"""A parse as plain data reads exactly as spaCy's own: tokens, trees, entities, noun chunks, and the rules on top."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hiera.link.mentions import MentionDetector
from hiera.link.nlp import SpacyModel
from hiera.link.parsed import Parsed
from hiera.link.rules import RulesDecomposer

TOKEN_ATTRS = ("text", "idx", "lower_", "lemma_", "pos_", "tag_", "dep_", "ent_type_", "is_stop", "is_alpha", "like_num")


def _questions(data_dir: Path, n: int) -> list[str]:
    path = data_dir / "hotpotqa" / "dev_subsampled.public250.jsonl"
    if not path.exists():
        pytest.skip(f"{path} not found")
    with path.open() as f:
        return [json.loads(line)["question_text"] for line in f][:n]


def _same_tokens(doc, p: Parsed) -> None:
    assert len(doc) == len(p)
    for tok in doc:
        mine = p[tok.i]
        assert tuple(getattr(tok, a) for a in TOKEN_ATTRS) == tuple(getattr(mine, a) for a in TOKEN_ATTRS)
        assert (tok.head.i, tok.left_edge.i) == (mine.head.i, mine.left_edge.i)
        assert [t.i for t in tok.children] == [t.i for t in mine.children]
        assert [t.i for t in tok.lefts] == [t.i for t in mine.lefts]
        assert [t.i for t in tok.rights] == [t.i for t in mine.rights]
        assert [t.i for t in tok.subtree] == [t.i for t in mine.subtree]
    assert [(e.text, e.label_, e.start, e.end, e.start_char, e.end_char) for e in doc.ents] == \
        [(e.text, e.label_, e.start, e.end, e.start_char, e.end_char) for e in p.ents]
    assert [(c.text, c.start, c.end, c.root.i, c.start_char, c.end_char) for c in doc.noun_chunks] == \
        [(c.text, c.start, c.end, c.root.i, c.start_char, c.end_char) for c in p.noun_chunks]
    assert [t.i for t in doc[2:5]] == [t.i for t in p[2:5]]


def test_real_questions_read_the_same_as_spacys_parse_after_a_json_round_trip(nlp: SpacyModel, data_dir: Path) -> None:
    for q in _questions(data_dir, 120):
        doc = nlp.nlp(q)
        _same_tokens(doc, Parsed.from_dict(json.loads(json.dumps(Parsed.from_spacy(doc).to_dict()))))


def test_mentions_and_decompositions_are_the_same_on_both(nlp: SpacyModel, data_dir: Path) -> None:
    detector, rules = MentionDetector(nlp), RulesDecomposer(nlp)
    shapes = set()
    for q in _questions(data_dir, 250):
        doc = nlp.nlp(q)
        parsed = Parsed.from_spacy(doc)
        assert detector.detect(q, parsed) == detector.detect(q, doc), q
        mine = rules.decompose(q, parsed)
        assert mine == rules.decompose(q, doc), q
        shapes.add(mine.shape)
    assert {"bridge", "none"} <= shapes and len(shapes) >= 3  # the rules were exercised, not just "none"


def test_a_parse_of_other_fields_is_refused() -> None:
    with pytest.raises(ValueError, match="expected"):
        Parsed.from_dict({"text": "", "fields": ["text"], "tokens": [], "ents": [], "noun_chunks": []})


def test_the_model_returns_plain_parses(nlp: SpacyModel) -> None:
    p = nlp("Were Scott Derrickson and Ed Wood of the same nationality?")
    assert isinstance(p, Parsed)
    assert [e.text for e in p.ents] == ["Scott Derrickson", "Ed Wood"]
    root = next(t for t in p if t.dep_ == "ROOT")
    assert root.head is root and root.text == "Were"
