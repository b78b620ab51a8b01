"""BM25 indexes with bm25s: build, save, memory-mapped load, score.

Defaults are Pyserini's (k1 = 0.9, b = 0.4), not bm25s's (1.5, 0.75): on
Wikipedia articles of very different lengths the lighter length normalization
is worth tens of points of document top-1 (measured when the defaults were chosen).

We score with ``get_scores`` (the whole score vector) and select top-k with
``argpartition``: the hierarchical ``bm25-dhr`` retriever needs the score of
every passage of a few documents, and the flat retriever costs the same.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from hiera.index.select import topk
from hiera.io import NPY_LOCK

TOKEN_PATTERN = r"(?u)\b\w\w+\b"


@dataclass(frozen=True)
class Bm25Config:
    k1: float = 0.9
    b: float = 0.4
    method: str = "lucene"
    stemmer: str = "english"
    stopwords: str = "en"

    def to_dict(self) -> dict[str, Any]:
        return {
            "k1": self.k1,
            "b": self.b,
            "method": self.method,
            "tokenizer": {"lower": True, "pattern": TOKEN_PATTERN, "stemmer": self.stemmer, "stopwords": self.stopwords},
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Bm25Config:
        tok = d.get("tokenizer", {})
        return cls(
            k1=float(d.get("k1", 0.9)),
            b=float(d.get("b", 0.4)),
            method=str(d.get("method", "lucene")),
            stemmer=str(tok.get("stemmer", "english")),
            stopwords=str(tok.get("stopwords", "en")),
        )


class Analyzer:
    """Lowercase, word tokens of ≥ 2 chars, English stopwords, Snowball stemming."""

    def __init__(self, config: Bm25Config) -> None:
        import Stemmer
        from bm25s.stopwords import STOPWORDS_EN

        self._split = re.compile(TOKEN_PATTERN).findall
        self._stop = frozenset(STOPWORDS_EN) if config.stopwords == "en" else frozenset()
        self._stem = Stemmer.Stemmer(config.stemmer).stemWords if config.stemmer else (lambda ws: ws)
        # A PyStemmer Stemmer is documented as single-thread only.
        self._lock = threading.Lock()

    def __call__(self, text: str) -> list[str]:
        words = [w for w in self._split(text.lower()) if w not in self._stop]
        with self._lock:
            return self._stem(words)


class Bm25Index:
    """A bm25s index plus the analyzer that must be used for its queries."""

    def __init__(self, retriever: Any, config: Bm25Config) -> None:
        self.retriever = retriever
        self.config = config
        self.analyzer = Analyzer(config)
        self.tokens: int | None = None  # the corpus's total length in tokens, known to a build (not saved by bm25s)

    @classmethod
    def build(cls, texts: Iterable[str], config: Bm25Config | None = None, show_progress: bool = False) -> Bm25Index:
        import bm25s

        config = config or Bm25Config()
        analyzer = Analyzer(config)
        tokens = [analyzer(t) or ["\x00empty"] for t in texts]
        retriever = bm25s.BM25(k1=config.k1, b=config.b, method=config.method)
        retriever.index(tokens, show_progress=show_progress)
        index = cls(retriever, config)
        index.tokens = sum(len(t) for t in tokens)
        return index

    def save(self, path: Path) -> None:
        self.retriever.save(str(path))

    @classmethod
    def load(cls, path: Path, config: Bm25Config, mmap: bool = True) -> Bm25Index:
        import bm25s

        with NPY_LOCK:  # bm25s reads .npy files (hiera.io.NPY_LOCK says why)
            retriever = bm25s.BM25.load(str(path), mmap=mmap, load_corpus=False)
        return cls(retriever, config)

    @cached_property
    def size(self) -> int:
        return int(self.retriever.scores["num_docs"])

    def df(self, terms: list[str]) -> list[int]:
        """Document frequency of each analyzed term (0 when the index does not know it)."""
        vocab = self.retriever.vocab_dict
        indptr = self.retriever.scores["indptr"]
        out = []
        for t in terms:
            i = vocab.get(t)
            out.append(int(indptr[i + 1] - indptr[i]) if i is not None and i + 1 < len(indptr) else 0)
        return out

    def term_ids(self, query: str) -> list[int]:
        """The index's ids of ``query``'s analyzed terms, in query order (unknown terms left out)."""
        return self.retriever.get_tokens_ids(self.analyzer(query))

    def _nonoccurrence(self, out: np.ndarray, ids: list[int]) -> np.ndarray:
        """``out`` plus the non-occurrence score of the query's terms that BM25L / BM25+ give every text (after the
        terms' own scores, as bm25s adds it)."""
        extra = getattr(self.retriever, "nonoccurrence_array", None)
        if extra is not None:
            out += np.float32(extra[np.asarray(ids)].sum())
        return out

    def scores(self, query: str) -> np.ndarray:
        """BM25 score of every indexed text for ``query`` (zeros if no term is known)."""
        ids = self.term_ids(query)
        if not ids:
            return np.zeros(self.size, dtype=np.float32)
        return np.asarray(self.retriever.get_scores_from_ids(ids), dtype=np.float32)

    def scores_at(self, query: str, positions: np.ndarray) -> np.ndarray:
        """BM25 scores of the texts at ``positions`` only: equal to ``scores(query)[positions]``, bit for bit.

        DHR's passage stage needs the BM25 score of a few hundred candidate
        passages; scoring every passage to read a few hundred costs a pass over
        the whole corpus (a million floats) per query. This walks each query
        term's posting list (sorted by position) and binary-searches the
        candidates in it, adding the terms in query order as bm25s does, so the
        float sums are the same. Where the positions are strictly increasing (a
        filter's allowed rows) and a term's posting list is the shorter side,
        the posting list is searched in the positions instead: a rare term
        costs its own length, not the candidates'.
        """
        pos = np.asarray(positions, dtype=np.int64)
        out = np.zeros(len(pos), dtype=np.float32)
        ids = self.term_ids(query)
        if not ids or len(pos) == 0:
            return out
        data, indices, indptr = (self.retriever.scores[k] for k in ("data", "indices", "indptr"))
        ordered = len(pos) > 64 and bool((pos[1:] > pos[:-1]).all())
        for t in ids:
            a, b = int(indptr[t]), int(indptr[t + 1])
            if a == b:
                continue
            posting = indices[a:b]
            if ordered and (b - a) * np.log2(len(pos) + 1) < len(pos) * np.log2(b - a + 1):
                j = np.minimum(np.searchsorted(pos, posting), len(pos) - 1)
                hit = pos[j] == posting
                out[j[hit]] += np.asarray(data[a:b][hit], dtype=np.float32)
                continue
            j = np.minimum(np.searchsorted(posting, pos), b - a - 1)
            hit = posting[j] == pos
            out[hit] += np.asarray(data[a:b][j[hit]], dtype=np.float32)
        return self._nonoccurrence(out, ids)

    def rows(self, positions: np.ndarray) -> Bm25Rows:
        """This index restricted to the texts at ``positions`` (increasing, no repeats): a filter's allowed rows.

        Made once per filter (one pass over the posting lists), it then scores
        a query over those rows in the time their share of the postings takes,
        where :meth:`scores_at` binary-searches every term's whole posting list.
        """
        pos = np.asarray(positions, dtype=np.int64)
        data, indices, indptr = (self.retriever.scores[k] for k in ("data", "indices", "indptr"))
        allowed = np.zeros(self.size, dtype=bool)
        allowed[pos] = True
        kept = np.flatnonzero(allowed[indices])  # entries of the postings that fall on an allowed row
        local = np.full(self.size, -1, dtype=np.int64)
        local[pos] = np.arange(len(pos))
        return Bm25Rows(self, np.asarray(data[kept], dtype=np.float32), local[np.asarray(indices)[kept]],
                        np.searchsorted(kept, np.asarray(indptr)), len(pos))

    def search(self, query: str, k: int) -> tuple[np.ndarray, np.ndarray]:
        """Top-``k`` (positions, scores), best first; only texts with a positive score."""
        return topk(self.scores(query), k, positive_only=True)


class Bm25Rows:
    """A :class:`Bm25Index` restricted to some of its rows (:meth:`Bm25Index.rows`): each term's postings on those
    rows only, numbered by their place among them."""

    def __init__(self, index: Bm25Index, data: np.ndarray, rows: np.ndarray, indptr: np.ndarray, n: int) -> None:
        self.index, self.data, self.rows_of, self.indptr, self.n = index, data, rows, indptr, n

    def scores(self, query: str) -> np.ndarray:
        """``index.scores_at(query, positions)``, bit for bit: the terms added in query order, as there."""
        out = np.zeros(self.n, dtype=np.float32)
        ids = self.index.term_ids(query)
        if not ids or self.n == 0:
            return out
        for t in ids:
            a, b = int(self.indptr[t]), int(self.indptr[t + 1])
            if a < b:
                out[self.rows_of[a:b]] += self.data[a:b]
        return self.index._nonoccurrence(out, ids)
