"""Mention detection: the spans of a question that may name a document.

Three detectors over one spaCy parse, united (a span found twice keeps its
first kind, in this order):

* ``entity``: named entities, except numbers, dates, amounts (they name no
  document: "1945", "three");
* ``quoted``: text between quotation marks (titles of works);
* ``capitalized``: runs of capitalized tokens (with lower-case "of", "the",
  "and", "de" … inside a run: "Kiss and Tell", "Bank of America"), the
  question's first word only when the run goes on past it;
* ``noun-chunk``: noun chunks without a leading determiner or wh-word
  ("the film" → "film"; a bare pronoun or wh-word is dropped).

Spans are character offsets into the question, so the trace can show them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from hiera.link.nlp import SpacyModel

SKIP_LABELS = frozenset({"DATE", "TIME", "PERCENT", "MONEY", "QUANTITY", "ORDINAL", "CARDINAL"})
_CONNECTORS = frozenset({"of", "the", "and", "de", "du", "la", "le", "von", "van", "der", "&", "-", "'s", "for", "in", "on"})
_QUOTED = re.compile(r"[\"“”]([^\"“”]{2,120})[\"“”]")
_WH = frozenset({"what", "which", "who", "whom", "whose", "where", "when", "how", "why"})


@dataclass(frozen=True)
class Mention:
    """A span of the question: its text, character offsets and which detector found it."""

    text: str
    start: int
    end: int
    kind: str  # "entity" | "quoted" | "capitalized" | "noun-chunk"
    label: str = ""  # the named-entity label, for kind == "entity"

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"text": self.text, "span": [self.start, self.end], "kind": self.kind}
        if self.label:
            d["label"] = self.label
        return d


class MentionDetector:
    """Mentions of a question (module docstring); shares its spaCy model with the rules decomposer."""

    def __init__(self, nlp: SpacyModel) -> None:
        self.nlp = nlp

    def detect(self, question: str, doc: Any = None) -> list[Mention]:
        doc = doc if doc is not None else self.nlp(question)
        found: list[Mention] = []
        seen: set[tuple[int, int]] = set()

        def add(start: int, end: int, kind: str, label: str = "") -> None:
            text = question[start:end].strip(" ,.?!;:'\"")
            if not text or (start, end) in seen or text.lower() in _WH:
                return
            start = question.index(text, start)
            end = start + len(text)
            if (start, end) in seen:
                return
            seen.add((start, end))
            found.append(Mention(text, start, end, kind, label))

        for ent in doc.ents:
            if ent.label_ not in SKIP_LABELS:
                add(ent.start_char, ent.end_char, "entity", ent.label_)
        for m in _QUOTED.finditer(question):
            add(m.start(1), m.end(1), "quoted")
        for start, end in _capitalized_runs(doc):
            add(start, end, "capitalized")
        for chunk in doc.noun_chunks:
            toks = [t for t in chunk if not (t.dep_ == "det" or t.lower_ in _WH or t.pos_ == "PRON")]
            if toks and not all(t.is_stop for t in toks):
                add(toks[0].idx, toks[-1].idx + len(toks[-1].text), "noun-chunk")
        return found


def _capitalized_runs(doc: Any) -> list[tuple[int, int]]:
    """Character spans of runs of capitalized tokens, connectors allowed inside."""
    runs: list[tuple[int, int]] = []
    i, n = 0, len(doc)
    while i < n:
        t = doc[i]
        if t.text[:1].isupper() and t.is_alpha and not (i == 0 and t.lower_ in _WH):
            j = i
            last = i
            while j + 1 < n:
                nxt = doc[j + 1]
                if nxt.text[:1].isupper() or nxt.like_num and nxt.i > i:
                    j += 1
                    last = j
                elif nxt.lower_ in _CONNECTORS and j + 2 < n and doc[j + 2].text[:1].isupper():
                    j += 1
                else:
                    break
            if not (i == 0 and last == 0):  # the question's first word alone is capitalized by position
                runs.append((doc[i].idx, doc[last].idx + len(doc[last].text)))
            i = last + 1
        else:
            i += 1
    return runs
