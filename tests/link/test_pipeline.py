"""Pieces of the linking pipeline that need no collection."""

from __future__ import annotations

from dataclasses import asdict

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


def test_settings_take_their_own_parameters_and_leave_the_rest() -> None:
    """The retriever hands over all of its parameters: the linker's are taken, None keeps a default, others are ignored."""
    fields = list(LinkSettings.__dataclass_fields__)
    default = LinkSettings()
    # a value for every field, each different from its default
    given = {f: (v + 1 if isinstance(v, int | float) else f"{v}-x") for f, v in asdict(default).items()}
    s = LinkSettings.from_params({**given, "coarse_depth": 50, "reranker": "m", "k": 3})
    assert asdict(s) == given
    # None is "not given" (an HTTP request's absent parameter), never a value
    assert LinkSettings.from_params({f: None for f in fields} | {"coarse_depth": 50}) == default
    one = LinkSettings.from_params({"entity_titles": 3, "event_titles": None})
    assert asdict(one) == asdict(default) | {"entity_titles": 3}
