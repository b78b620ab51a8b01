"""BM25 shards that score exactly like one index over the whole corpus.

A BM25 score depends on the corpus through the IDF of each term (document
frequency, number of texts) and the average text length. A shard indexed on
its own would use its local ones and score differently, so the build first
collects the corpus-wide statistics (a sum over shards: document frequency per
term, number of texts, total length) and then computes every shard's score
matrix with the global ones. The per-(text, term) scores are then the same
floats as the unsharded index's, and so is every query's sum (bm25s adds the
query terms in query order in both cases).

The matrix is built with bm25s's own scoring functions; only the statistics
fed to them change. The saved index is a plain bm25s index
(:meth:`hiera.index.bm25.Bm25Index.load` reads it).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

from hiera.index.bm25 import Analyzer, Bm25Config, Bm25Index

EMPTY_TOKEN = "\x00empty"  # what Bm25Index.build indexes for a text without any token


def analyze(texts: Iterable[str], config: Bm25Config) -> list[list[str]]:
    """Tokens of every text, exactly as :meth:`Bm25Index.build` makes them."""
    analyzer = Analyzer(config)
    return [analyzer(t) or [EMPTY_TOKEN] for t in texts]


@dataclass
class CorpusStats:
    """What BM25 needs of the whole corpus; shards' statistics add up."""

    n_docs: int = 0
    total_len: int = 0
    df: Counter = field(default_factory=Counter)

    @classmethod
    def of(cls, tokens: Sequence[Sequence[str]]) -> CorpusStats:
        df: Counter = Counter()
        for doc in tokens:
            df.update(set(doc))
        return cls(len(tokens), sum(len(d) for d in tokens), df)

    def __add__(self, other: CorpusStats) -> CorpusStats:
        return CorpusStats(self.n_docs + other.n_docs, self.total_len + other.total_len, self.df + other.df)

    @property
    def avg_len(self) -> np.float64:
        # bm25s takes np.mean of the integer lengths: the exact sum (float64 holds it) over n, the same float.
        # Its type matters too: a numpy float64 (not a Python float) makes bm25s compute the term-frequency
        # part in float64 before rounding to float32, as the unsharded build does (NumPy 2 promotion rules).
        return np.float64(self.total_len) / np.float64(self.n_docs) if self.n_docs else np.float64(0.0)

    def to_dict(self) -> dict:
        return {"texts": self.n_docs, "tokens": self.total_len, "terms": len(self.df)}


def with_base(base: Bm25Index, base_tokens: int, tokens: Sequence[Sequence[str]]) -> CorpusStats:
    """The statistics of ``base``'s corpus plus ``tokens`` (a delta segment's), for the delta's terms only.

    A delta indexed with them scores its texts as one index over base and
    delta would, except that tombstoned texts still count (the drift that
    compaction removes). ``base_tokens``: the base's total length, which
    bm25s does not save (the build's manifest records it).
    """
    delta = CorpusStats.of(tokens)
    terms = list(delta.df)
    df = Counter({t: n + d for t, n, d in zip(terms, base.df(terms), (delta.df[t] for t in terms), strict=True)})
    return CorpusStats(base.size + delta.n_docs, int(base_tokens) + delta.total_len, df)


def build_delta(texts: Sequence[str], base: Bm25Index, base_tokens: int, config: Bm25Config) -> tuple[Bm25Index, int]:
    """A delta segment's BM25 index over ``texts``, scored with ``base``'s statistics plus its own
    (:func:`with_base`), and the delta's length in tokens (what a later delta over both adds to)."""
    tokens = analyze(texts, config)
    stats = with_base(base, base_tokens, tokens)
    return build_with_stats(tokens, stats, config), stats.total_len - int(base_tokens)


def build_with_stats(tokens: Sequence[Sequence[str]], stats: CorpusStats, config: Bm25Config) -> Bm25Index:
    """A bm25s index over ``tokens`` whose IDF and average length are ``stats``'s (the whole corpus)."""
    import bm25s
    from bm25s.scoring import (
        _build_idf_array,
        _build_nonoccurrence_array,
        _build_scores_and_indices_for_matrix,
        _select_idf_scorer,
        _select_tfc_scorer,
    )

    r = bm25s.BM25(k1=config.k1, b=config.b, method=config.method)
    vocab: dict[str, int] = {}
    ids = [[vocab.setdefault(t, len(vocab)) for t in doc] for doc in tokens]
    local_df: Counter = Counter()
    for doc in ids:
        local_df.update(set(doc))
    global_df = {i: stats.df[t] for t, i in vocab.items()}
    idf_fn = _select_idf_scorer(r.idf_method)
    avg = stats.avg_len
    nonocc = None
    if r.method in r.methods_requiring_nonoccurrence:
        nonocc = _build_nonoccurrence_array(
            doc_frequencies=global_df, n_docs=stats.n_docs, compute_idf_fn=idf_fn,
            calculate_tfc_fn=_select_tfc_scorer(r.method), l_d=avg, l_avg=avg, k1=r.k1, b=r.b, delta=r.delta,
            dtype=r.dtype,
        )
    idf = _build_idf_array(doc_frequencies=global_df, n_docs=stats.n_docs, compute_idf_fn=idf_fn, dtype=r.dtype)
    flat, doc_idx, vocab_idx = _build_scores_and_indices_for_matrix(
        corpus_token_ids=ids, idf_array=idf, avg_doc_len=avg, doc_frequencies={i: local_df[i] for i in range(len(vocab))},
        k1=r.k1, b=r.b, delta=r.delta, nonoccurrence_array=nonocc, method=r.method, dtype=r.dtype,
        int_dtype=r.int_dtype, show_progress=False,
    )
    data, indices, indptr = r._np_csc(data=flat, rows=doc_idx, cols=vocab_idx, shape=(len(ids), len(vocab)))
    r.scores = {"data": np.asarray(data).astype(r.dtype), "indices": indices, "indptr": indptr, "num_docs": len(ids)}
    vocab.setdefault("", max(vocab.values(), default=-1) + 1)  # bm25s's create_empty_token
    r.vocab_dict = vocab
    r.unique_token_ids_set = set(vocab.values())
    r.nonoccurrence_array = nonocc
    return Bm25Index(r, config)
