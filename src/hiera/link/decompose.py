"""Query decomposition behind one interface: a question → sub-questions (and, from a model, hypothetical sub-facts).

:class:`Decomposer` is the seam, :class:`Decomposition` what every
decomposer returns. The decomposers are named in :data:`DECOMPOSERS`
(``module:Class``, imported when asked for, as :data:`hiera.spec.METHODS`
names retrievers), so this module imports none of them and they all import
it:

* ``rules`` (:class:`hiera.link.rules.RulesDecomposer`, no network): rules over
  spaCy's dependency parse for the common multi-hop shapes;
* ``none`` (:class:`NoDecomposer`): the question stays whole;
* ``endpoint`` (:class:`hiera.link.endpoint.EndpointDecomposer`, with
  ``decomposer_url``): an OpenAI-compatible chat-completions model writes 5
  sets of 3 supporting sentences, as the paper's T5 decomposer did; it falls
  back to the rules (with a warning) when the endpoint fails.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import Any, Protocol

from hiera.errors import BadInputError
from hiera.link.nlp import SpacyModel

BRIDGE = "[BRIDGE]"
# name → "module:Class"; hiera.spec.LINK_DECOMPOSERS declares the same choices (the tests check they agree)
DECOMPOSERS: dict[str, str] = {
    "rules": "hiera.link.rules:RulesDecomposer",
    "none": "hiera.link.decompose:NoDecomposer",
    "endpoint": "hiera.link.endpoint:EndpointDecomposer",
}


@dataclass
class SubQuestion:
    """One hop: its text, whether it waits for a bridge entity, and the type the bridge should have."""

    text: str
    needs_bridge: bool = False  # contains BRIDGE, filled from the previous hop's top passage
    answer_type: str = ""  # spaCy entity labels the bridge may have ("PERSON", "GPE|LOC" …), "" when unknown

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"text": self.text}
        if self.needs_bridge:
            d["needs_bridge"] = True
        if self.answer_type:
            d["answer_type"] = self.answer_type
        return d


@dataclass
class Decomposition:
    """What a decomposer made of a question: its shape, sub-questions, sentences and any warnings."""

    shape: str  # "comparison" | "both" | "conjunction" | "temporal" | "bridge" | "none" | "generated"
    sub_questions: list[SubQuestion] = field(default_factory=list)
    sentences: list[list[str]] = field(default_factory=list)  # an endpoint's sets of hypothetical sub-facts
    source: str = "rules"  # which decomposer produced it: "rules" | "endpoint" | "none"
    warnings: list[str] = field(default_factory=list)

    def texts(self) -> list[str]:
        """Every text to link: the sub-questions, then each sentence of each set."""
        return [s.text for s in self.sub_questions] + [s for group in self.sentences for s in group]

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "decomposer": self.source,
            "shape": self.shape,
            "sub_questions": [s.to_dict() for s in self.sub_questions],
        }
        if self.sentences:
            d["sentence_sets"] = self.sentences
        if self.warnings:
            d["warnings"] = list(self.warnings)
        return d


class Decomposer(Protocol):
    """``decompose(question, doc)`` → :class:`Decomposition`; never raises for a well-formed question.

    ``doc`` is spaCy's parse of the question when the caller has one (the
    pipeline's mention detector made it): a decomposer that parses reuses it.
    """

    name: str

    def decompose(self, question: str, doc: Any = None) -> Decomposition: ...


class NoDecomposer:
    """``decomposer=none``: the question stays whole (the "no decomposition" ablation)."""

    name = "none"

    @classmethod
    def create(cls, nlp: SpacyModel, url: str | None = None, timeout: float = 10.0) -> NoDecomposer:
        return cls()

    def decompose(self, question: str, doc: Any = None) -> Decomposition:
        return Decomposition("none", source="none")


def get_decomposer(name: str, nlp: SpacyModel, url: str | None = None, timeout: float = 10.0) -> Decomposer:
    """The decomposer called ``name``; ``endpoint`` needs ``url``; an unknown name is a one-line error.

    Every decomposer class builds itself from the same settings (``create``), so
    this factory needs to know none of them.
    """
    impl = DECOMPOSERS.get(name)
    if impl is None:
        raise BadInputError(f"unknown decomposer {name!r}; known: {', '.join(DECOMPOSERS)}")
    module, _, cls = impl.partition(":")
    return getattr(importlib.import_module(module), cls).create(nlp, url=url, timeout=timeout)
