"""A cross-encoder rerank stage that works after any retriever.

``RerankRetriever(base, Reranker(path), depth=N)`` asks ``base`` for its top
``max(N, k)``, scores the first ``N`` (question, titled passage) pairs with the
cross-encoder (:class:`hiera.crossencoder.Reranker`), orders them by its
probability and keeps the rest in the base order after them. Every reranked
hit keeps the base stages and gains two: ``retrieve`` (its score and rank
before reranking) and ``rerank``; the trace gains a ``rerank`` step.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from hiera.crossencoder import MAX_DEPTH, Reranker, hit_input
from hiera.errors import BadInputError
from hiera.index.select import ranks_of
from hiera.results import Hit, Results, StageScore, TraceStep, check_k, check_level, with_steps
from hiera.spec import Level


class RerankRetriever:
    """Any retriever followed by a cross-encoder; implements the Retriever protocol."""

    def __init__(
        self, base: Any, reranker: Reranker, depth: int = 20, levels: tuple[Level, ...] | None = None
    ) -> None:
        if not isinstance(depth, int) or depth <= 0 or depth > MAX_DEPTH:
            raise BadInputError(f"--rerank-depth must be an integer in 1..{MAX_DEPTH}, got {depth!r}")
        self.base = base
        self.reranker = reranker
        self.depth = depth
        self.name = f"{base.name}+rerank"
        self.levels = levels or tuple(base.levels)
        self.spec = base.spec  # the base method's parameters pass through unchanged
        self.defaults = {**base.defaults, "rerank_depth": depth}
        col = getattr(base, "col", None)
        self.sep = col.title_sep if col is not None else ", "

    def search(self, query: str, k: int = 10, level: Level | None = None, **params: Any) -> Results:
        return self.batch_search([query], k, level, **params)[0]

    def batch_search(
        self, queries: Sequence[str], k: int = 10, level: Level | None = None, **params: Any
    ) -> list[Results]:
        k = check_k(k)
        if level is not None:
            check_level(self.name, self.levels, level)
        results = self.base.batch_search(queries, max(k, self.depth), level, **params)
        return [self._rerank(res, k) for res in results]

    def _rerank(self, res: Results, k: int) -> Results:
        t = time.perf_counter()
        head, tail = res.hits[: self.depth], res.hits[self.depth :]
        probs = self.reranker.score(res.query, [hit_input(h, self.sep) for h in head])
        final = self.reranker.combine(probs, np.array([h.score for h in head]))
        order = np.argsort(-final, kind="stable")
        prob_rank = ranks_of(probs)  # the cross-encoder's own rank, for the explanation
        hits: list[Hit] = []
        for new_rank, i in enumerate(order, start=1):
            h = head[int(i)]
            stages = {
                **h.stages,
                "retrieve": StageScore(h.score, h.rank),
                "rerank": StageScore(float(probs[i]), int(prob_rank[i])),
            }
            hits.append(replace(h, rank=new_rank, score=float(final[i]), stages=stages))
        for j, h in enumerate(tail, start=len(hits) + 1):
            hits.append(replace(h, rank=j, stages={**h.stages, "retrieve": StageScore(h.score, h.rank)}))
        step = TraceStep(
            "rerank",
            {
                "model": self.reranker.name,
                "depth": len(head),
                "weight": self.reranker.weight,
                "threshold": self.reranker.threshold,
                "relevant": int((probs >= self.reranker.threshold).sum()),
            },
            (time.perf_counter() - t) * 1000.0,
        )
        params = {**res.params, "rerank_depth": self.depth, "rerank_threshold": self.reranker.threshold}
        return Results(
            query=res.query,
            level=res.level,
            hits=hits[:k],
            retriever=self.name,
            params=params,
            trace=with_steps(res.trace, step),
            answer_set=res.answer_set,
        )

