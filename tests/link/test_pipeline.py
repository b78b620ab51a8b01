"""Pieces of the linking pipeline that need no collection."""

from __future__ import annotations

from hiera.link.pipeline import _NAME, LinkSettings, _sub_names


def test_names_in_a_first_hop_passage_and_their_sub_spans() -> None:
    text = "He served under President Bill Clinton and the Governor of Arkansas, then joined Kiss and Tell."
    runs = [m.group(0) for m in _NAME.finditer(text)]
    # connectors join names into one run; its sub-spans recover each name
    assert runs == ["He", "President Bill Clinton and the Governor of Arkansas", "Kiss and Tell."]
    subs = _sub_names(runs[1])
    assert {"President Bill Clinton", "Bill Clinton", "Governor of Arkansas", "Arkansas"} <= set(subs)
    assert "of Arkansas" not in subs and "Clinton and the" not in subs  # a span starts and ends with a capital
    assert _sub_names(runs[2])[0] == "Kiss and Tell"  # sentence punctuation is not part of a name


def test_settings_from_retriever_parameters() -> None:
    s = LinkSettings.from_params({"entity_titles": 3, "coarse_depth": 50, "decomposer": "none", "reranker": None})
    assert (s.entity_titles, s.event_titles, s.decomposer) == (3, 5, "none")
