"""Event linking: a question or a sentence → the documents whose summaries describe what it talks about.

The paper's EveLink links event mentions and whole sentences to Wikipedia
pages; our equivalent matches the text against every document's summary
(title + lead + table of contents) with two scorers fused by reciprocal
rank (:func:`hiera.fusion.rrf`): the document encoder's cosine
(the ``summary`` document stage's FAISS index) and BM25 over documents (the
``bm25`` stage). A build without a dense index links by BM25 alone. The top
``n`` documents are linked, each with its fused score divided by the best
and its rank in either list.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from hiera.fusion import Ranked, by_max, rrf
from hiera.index.select import topk
from hiera.query import text_query
from hiera.score.docstage import stage

DEPTH = 50  # documents each scorer contributes before fusion


@dataclass
class EventHit:
    """A document linked to a text by its summary."""

    doc: int
    title: str
    score: float  # fused RRF score / best
    bm25_rank: int  # 0: not in BM25's list
    dense_rank: int  # 0: not in the dense list (or no dense index)

    def to_dict(self) -> dict[str, Any]:
        return {"title": self.title, "score": round(self.score, 4), "bm25_rank": self.bm25_rank, "dense_rank": self.dense_rank}


class EventLinker:
    """Summary matching over one collection (module docstring)."""

    def __init__(self, col: Any, titles: list[str]) -> None:
        self.col = col
        self.titles = titles

    def link(self, text: str, n: int, qd: np.ndarray | None = None) -> list[EventHit]:
        if n <= 0:
            return []
        col = self.col
        depth = min(max(DEPTH, n), col.n_docs)
        lists = []
        if "bm25" in col.built:
            pos, sc = stage("bm25").top(col, text_query(text, col.live), depth)
            lists.append(Ranked(np.asarray(pos, dtype=np.int64), np.asarray(sc, dtype=np.float32)))
        else:
            lists.append(Ranked(np.zeros(0, np.int64), np.zeros(0, np.float32)))
        if qd is not None and col.has_dense:
            pos, sc = stage("summary").top(col, text_query(text, col.live, qd=qd), depth)
            lists.append(Ranked(pos, sc))
        aligned, fused = rrf(lists)
        if len(aligned.ids) == 0:
            return []
        idx, sc = topk(fused, n)
        sc = by_max(sc)
        ranks = aligned.ranks
        return [
            EventHit(int(aligned.ids[i]), self.titles[int(aligned.ids[i])], float(s), int(ranks[0][i]),
                     int(ranks[1][i]) if len(ranks) > 1 else 0)
            for i, s in zip(idx, sc, strict=True)
        ]
