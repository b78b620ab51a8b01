"""The title and alias index: every way a document can be named, looked up exactly, fuzzily, by BM25 and densely.

Names of a document: its title, the title without its parenthetical qualifier
("Kiss and Tell (1945 film)" → "Kiss and Tell"), and every stored redirect
alias that points at it (``aliases`` table of the corpus store). Keys are
:func:`hiera.link.normalize.normalize`'d, so case, accents and punctuation
never decide a match.

The **prior** of a document is how often other documents link to it
(``Document.links``, kept by the wikipedia-xml reader): ``log(1 + in-links)``
divided by the largest. Anchor *texts* are not stored by any reader (a
wikilink keeps its target, and its display text becomes plain text), so the
prior is per document, not per (anchor, document) pair; sources without
wikilinks (HotpotQA's paragraph pool, SQuAD, JSONL) give every document the
same prior and :attr:`TitleIndex.has_prior` is false.

Lookups (each returns :class:`TitleMatch` with a score in [0, 1]):

* :meth:`exact`: the normalized mention is a key (score 1);
* :meth:`fuzzy`: rapidfuzz's ``ratio`` over the keys (misspellings, a
  missing or extra word), score = ratio / 100 at or above ``cutoff``;
* :meth:`bm25`: BM25 over the names (a partial mention: "Derrickson" for
  "Scott Derrickson"), divided by the best;
* :meth:`dense`: cosine between a query vector and the passage encoder's
  vectors of the names (encoded once, when first asked).
"""

from __future__ import annotations

import math
import threading
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from hiera.index.bm25 import Bm25Index
from hiera.index.select import topk
from hiera.link.normalize import base_name, normalize
from hiera.score.fusion import by_max


@dataclass(frozen=True)
class TitleMatch:
    """One document a name lookup found."""

    doc: int  # document position (index order)
    name: str  # the name that matched (title, base title or alias), as stored
    kind: str  # "title" | "base" | "alias"
    via: str  # "exact" | "fuzzy" | "bm25" | "dense"
    score: float  # match strength in [0, 1]


class TitleIndex:
    """Names → documents; see the module docstring for what is indexed and how it is searched."""

    def __init__(self, titles: list[str], aliases: Iterable[tuple[str, str]] = (), links: Iterable[list[str]] = ()) -> None:
        self.titles = titles
        by_title: dict[str, list[int]] = {}
        for i, t in enumerate(titles):
            by_title.setdefault(t, []).append(i)
        entries: dict[str, dict[int, tuple[str, str]]] = {}  # key -> doc -> (name, kind); first kind wins

        def add(name: str, doc: int, kind: str) -> None:
            key = normalize(name)
            if key:
                entries.setdefault(key, {}).setdefault(doc, (name, kind))

        for i, t in enumerate(titles):
            add(t, i, "title")
        for i, t in enumerate(titles):
            b = base_name(t)
            if b != t:
                add(b, i, "base")
        for alias, target in aliases:
            for d in by_title.get(target, by_title.get(base_name(target), [])):
                add(alias, d, "alias")
        self._entries = entries
        self.keys = list(entries)
        self._rows = [(key, doc, name, kind) for key in self.keys for doc, (name, kind) in entries[key].items()]
        inlinks: Counter[int] = Counter()
        for targets in links:
            for t in set(targets):
                for d in by_title.get(t, ()):
                    inlinks[d] += 1
        self.has_prior = bool(inlinks)
        top = math.log1p(max(inlinks.values())) if inlinks else 1.0
        self.prior = np.array([math.log1p(inlinks.get(i, 0)) / top for i in range(len(titles))], dtype=np.float32)
        self._bm25: Bm25Index | None = None
        self._vectors: np.ndarray | None = None
        self._lock = threading.Lock()

    @classmethod
    def from_collection(cls, col: Any) -> TitleIndex:
        """Every document title of ``col`` (index order), its stored redirects and wikilinks."""
        titles = [d.title for d in col.iter_docs()]
        return cls(titles, col.store.iter_aliases(), col.store.iter_doc_links())

    def __len__(self) -> int:
        return len(self.keys)

    # -- lookups ------------------------------------------------------------------------------
    def _matches(self, key: str, via: str, score: float) -> list[TitleMatch]:
        return [TitleMatch(doc, name, kind, via, score) for doc, (name, kind) in self._entries.get(key, {}).items()]

    def exact(self, mention: str) -> list[TitleMatch]:
        return self._matches(normalize(mention), "exact", 1.0)

    def fuzzy(self, mention: str, limit: int = 5, cutoff: float = 88.0) -> list[TitleMatch]:
        """Names within rapidfuzz ``ratio`` ``cutoff`` of the mention (the exact key itself excluded)."""
        from rapidfuzz import fuzz, process

        key = normalize(mention)
        if not key:
            return []
        found = process.extract(key, self.keys, scorer=fuzz.ratio, limit=limit + 1, score_cutoff=cutoff)
        out: list[TitleMatch] = []
        for name, score, _ in found:
            if name != key:
                out.extend(self._matches(name, "fuzzy", float(score) / 100.0))
        return out

    def bm25(self, text: str, k: int = 5) -> list[TitleMatch]:
        """BM25 over the names (one text per key and document), score divided by the best."""
        with self._lock:
            if self._bm25 is None:
                self._bm25 = Bm25Index.build(name for _, _, name, _ in self._rows)
        pos, sc = self._bm25.search(text, k)
        sc = by_max(sc)
        return [TitleMatch(self._rows[p][1], self._rows[p][2], self._rows[p][3], "bm25", float(s)) for p, s in zip(pos, sc, strict=True)]

    def dense(self, encoder: Any, query_vector: np.ndarray, k: int = 5) -> list[TitleMatch]:
        """Cosine of ``query_vector`` with ``encoder``'s vector of every name (encoded on first use)."""
        with self._lock:
            if self._vectors is None:
                self._vectors = np.asarray(encoder.encode_document([name for _, _, name, _ in self._rows]), dtype=np.float32)
        pos, sc = topk(self._vectors @ np.asarray(query_vector, dtype=np.float32), k)
        return [TitleMatch(self._rows[p][1], self._rows[p][2], self._rows[p][3], "dense", float(s)) for p, s in zip(pos, sc, strict=True)]
