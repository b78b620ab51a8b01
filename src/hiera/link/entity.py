"""Entity linking: mentions → candidate documents from the alias index → disambiguated top titles.

Candidates of a mention come from :class:`~hiera.link.titles.TitleIndex`:
exact and fuzzy name lookups for every mention, and for the mentions that
look like names (``entity``, ``quoted``, ``capitalized``) also BM25 and dense
search over the names, which find a document from part of its name. A BM25
or dense candidate's match is rapidfuzz's ``token_set_ratio`` between the
mention and the name (1 when one's words contain the other's), times
:data:`PARTIAL`, so a partial match never outranks an exact one.

Disambiguation (the paper's GENRE scores a title given the whole question;
we score the same evidence explicitly)::

    score = W_MATCH · match · kind weight + W_SIM · similarity + W_PRIOR · prior

``similarity`` is the cosine between the question (document encoder) and the
candidate's summary vector (title + lead), or, without a dense index, the
candidate's BM25 score for the question divided by the best; ``prior`` is the
in-link prior of the index (0 everywhere when the source has no links, and
its weight then goes to the match). A document keeps its best candidate;
the top ``n`` are linked.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from hiera.fusion import by_max
from hiera.link.mentions import Mention
from hiera.link.titles import TitleIndex, TitleMatch
from hiera.text import name_key

KIND_WEIGHT = {"entity": 1.0, "quoted": 1.0, "capitalized": 0.9, "noun-chunk": 0.6, "bridge": 1.0}
NAME_LIKE = frozenset({"entity", "quoted", "capitalized", "bridge"})
PARTIAL = 0.85
W_MATCH, W_SIM, W_PRIOR = 0.55, 0.35, 0.10
PER_MENTION = 3
MIN_MATCH = 0.5  # a partial match weaker than this (half the words) is noise, not a candidate  # candidates each fuzzy / BM25 / dense lookup contributes


@dataclass
class Candidate:
    """A candidate document for a mention, with every part of its score."""

    doc: int
    title: str
    mention: str
    kind: str  # the mention's kind
    via: str  # the lookup that found it: exact | fuzzy | bm25 | dense
    name: str  # the name that matched (title or alias)
    match: float
    similarity: float
    prior: float
    score: float

    def to_dict(self) -> dict[str, Any]:
        return {
            "title": self.title, "mention": self.mention, "via": self.via, "name": self.name,
            "match": round(self.match, 4), "similarity": round(self.similarity, 4), "prior": round(self.prior, 4),
            "score": round(self.score, 4),
        }


class EntityLinker:
    """Candidates and disambiguation over one collection's title index (module docstring)."""

    def __init__(self, col: Any, titles: TitleIndex) -> None:
        self.col = col
        self.titles = titles

    def lookup(self, mention: Mention, vector: np.ndarray | None) -> list[TitleMatch]:
        """Every name match of one mention (exact, fuzzy, and for name-like mentions BM25 and dense)."""
        t = self.titles
        found = t.exact(mention.text) + t.fuzzy(mention.text, PER_MENTION)
        if mention.kind in NAME_LIKE:
            found += t.bm25(mention.text, PER_MENTION)
            if vector is not None:
                found += t.dense(self.col.doc_encoder, vector, PER_MENTION)
        return found

    def link(
        self,
        question: str,
        mentions: list[Mention],
        n: int,
        qd: np.ndarray | None = None,
        mention_vectors: dict[str, np.ndarray] | None = None,
    ) -> tuple[list[Candidate], int]:
        """The top ``n`` documents (one best candidate each) and how many candidates were scored."""
        from rapidfuzz import fuzz

        raw: list[tuple[Mention, TitleMatch, float]] = []
        for m in mentions:
            key = name_key(m.text)
            for tm in self.lookup(m, (mention_vectors or {}).get(m.text)):
                match = tm.score
                if tm.via in ("bm25", "dense"):
                    match = PARTIAL * fuzz.token_set_ratio(key, name_key(tm.name)) / 100.0
                if match >= MIN_MATCH:
                    raw.append((m, tm, match * KIND_WEIGHT.get(m.kind, 0.6)))
        if not raw:
            return [], 0
        docs = np.array(sorted({tm.doc for _, tm, _ in raw}), dtype=np.int64)
        sim = dict(zip(docs.tolist(), self.similarity(question, docs, qd).tolist(), strict=True))
        w_match = W_MATCH if self.titles.has_prior else W_MATCH + W_PRIOR
        w_prior = W_PRIOR if self.titles.has_prior else 0.0
        best: dict[int, Candidate] = {}
        for m, tm, match in raw:
            prior = float(self.titles.prior[tm.doc])
            score = w_match * match + W_SIM * sim[tm.doc] + w_prior * prior
            c = best.get(tm.doc)
            if c is None or score > c.score:
                best[tm.doc] = Candidate(tm.doc, self.titles.titles[tm.doc], m.text, m.kind, tm.via, tm.name, match,
                                         sim[tm.doc], prior, score)
        ranked = sorted(best.values(), key=lambda c: (-c.score, c.doc))
        return ranked[:n], len(raw)

    def similarity(self, question: str, docs: np.ndarray, qd: np.ndarray | None) -> np.ndarray:
        """Question–summary similarity of ``docs``: cosine with the document vectors, else BM25 / best."""
        if qd is not None and self.col.has_dense:
            return self.col.doc_vectors[docs].astype(np.float32) @ np.asarray(qd, dtype=np.float32)
        full = by_max(self.col.bm25_docs.scores(question))
        return np.asarray(full[docs], dtype=np.float32)
