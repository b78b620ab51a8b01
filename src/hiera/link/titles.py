"""The title and alias index: every way a document can be named, looked up exactly, fuzzily, by BM25 and densely.

Names of a document: its title, the title without its parenthetical qualifier
("Kiss and Tell (1945 film)" → "Kiss and Tell"), and every stored redirect
alias that points at it (``aliases`` table of the corpus store). Keys are
:func:`hiera.text.name_key`'d, so case, accents and punctuation never decide
a match. The table is built with the index (:mod:`hiera.index.names`:
memory-mapped rows, exact keys by binary search, BM25 over the names, the
names' vectors in a FAISS index), so a search process encodes nothing but
its query; a build made before it had that table gets one made in memory.

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
* :meth:`dense`: cosine between a query vector and the document encoder's
  vectors of the names (from the build; encoded once, when first asked, for
  a table made in memory).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from hiera.fusion import by_max
from hiera.index.dense import faiss_search
from hiera.index.masked import bm25_top, vector_search
from hiera.index.names import MemoryNames, NameTable
from hiera.index.segments import SegmentedNames
from hiera.index.select import topk
from hiera.query import Allowed
from hiera.text import name_key


@dataclass(frozen=True)
class TitleMatch:
    """One document a name lookup found."""

    doc: int  # document position (index order)
    name: str  # the name that matched (title, base title or alias), as stored
    kind: str  # "title" | "base" | "alias"
    via: str  # "exact" | "fuzzy" | "bm25" | "dense"
    score: float  # match strength in [0, 1]


class TitleIndex:
    """Names → documents over a name table; see the module docstring for what is indexed and how it is searched.

    ``TitleIndex(titles, aliases, links)`` makes the table in memory;
    :meth:`from_collection` uses the build's.
    """

    def __init__(self, titles: list[str] | None = None, aliases: Iterable[tuple[str, str]] = (),
                 links: Iterable[list[str]] = (), *, table: NameTable | SegmentedNames | MemoryNames | None = None,
                 vectors: Any = None, live: np.ndarray | None = None) -> None:
        """``live``: the collection's live documents (a changed build's; ``None``: all), the only ones a name
        may lead to, so that a table written before a removal never links to a removed title or alias."""
        self.table = table if table is not None else MemoryNames(titles or [], aliases, links)
        self.titles = self.table.titles  # document titles in index order (a sequence, decoded on access)
        self.prior = self.table.prior
        self.has_prior = self.table.has_prior
        self._index = vectors  # a FAISS-shaped index over the names' vectors (from the build), or None
        self._vectors: np.ndarray | None = None
        self._lock = threading.Lock()
        self._live = None if live is None else Allowed.rows("live names", np.asarray(live)[np.asarray(self.table.doc)])

    @classmethod
    def from_collection(cls, col: Any) -> TitleIndex:
        """The build's name table (with its vectors when the build is dense); made in memory for older builds."""
        table, vectors = col.name_index()
        live = col.live.docs if col.live is not None else None
        if table is not None:
            return cls(table=table, vectors=vectors, live=live)
        titles = [d.title if d is not None else "" for d in col.docs_by_position()]
        return cls(titles, col.store.iter_aliases(), col.store.iter_doc_links(), live=live)

    def __len__(self) -> int:
        return len(self.table)

    @property
    def keys(self) -> list[str]:
        return self.table.key_list

    # -- lookups ------------------------------------------------------------------------------
    def _match(self, row: int, via: str, score: float) -> TitleMatch:
        t = self.table
        return TitleMatch(int(t.doc[row]), t.names[row], t.kind_name(row), via, score)

    def _matches(self, key: str, via: str, score: float) -> list[TitleMatch]:
        live = self._live
        return [self._match(r, via, score) for r in self.table.rows_of(key) if live is None or live.docs[r]]

    def exact(self, mention: str) -> list[TitleMatch]:
        return self._matches(name_key(mention), "exact", 1.0)

    def fuzzy(self, mention: str, limit: int = 5, cutoff: float = 88.0) -> list[TitleMatch]:
        """Names within rapidfuzz ``ratio`` ``cutoff`` of the mention (the exact key itself excluded)."""
        from rapidfuzz import fuzz, process

        key = name_key(mention)
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
        index = self.table.bm25
        if index is None:
            return []
        pos, sc = index.search(text, k) if self._live is None else bm25_top(index, text, k, self._live, "passage")
        return [self._match(int(p), "bm25", float(s)) for p, s in zip(pos, by_max(sc), strict=True)]

    def dense(self, encoder: Any, query_vector: np.ndarray, k: int = 5) -> list[TitleMatch]:
        """Cosine of ``query_vector`` with ``encoder``'s vector of every name (the build's, or encoded on first use)."""
        q = np.asarray(query_vector, dtype=np.float32)
        if self._index is not None:
            ids, sc = (faiss_search(self._index, q, k) if self._live is None else
                       vector_search(self._index, self.table.vectors, q, k, self._live, "passage"))
            keep = ids[0] >= 0
            pos, sc = ids[0][keep], sc[0][keep]
        else:
            with self._lock:
                if self._vectors is None:
                    names = [self.table.names[i] for i in range(len(self.table))]
                    self._vectors = np.asarray(encoder.encode_document(names), dtype=np.float32)
            scores = self._vectors @ q
            pos, sc = topk(scores if self._live is None else np.where(self._live.docs, scores, -np.inf), k)
            keep = np.isfinite(sc)
            pos, sc = pos[keep], sc[keep]
        return [self._match(int(p), "dense", float(s)) for p, s in zip(pos, sc, strict=True)]
