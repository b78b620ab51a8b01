"""A cross-encoder rerank stage that works after any retriever.

``RerankRetriever(base, Reranker(path), depth=N)`` asks ``base`` for its top
``max(N, k)``, scores the first ``N`` (question, titled passage) pairs with the
cross-encoder, orders them by its probability and keeps the rest in the
base order after them. Every reranked hit keeps the base stages and gains two:
``retrieve`` (its score and rank before reranking) and ``rerank``; the trace
gains a ``rerank`` step. The calibrated threshold (from ``hiera
train-reranker``) tells which hits the model calls relevant.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from hiera.encode import model_fingerprint, resolve_model_path
from hiera.errors import BadInputError, HieraError
from hiera.io import loads_json
from hiera.models import check_weights, offline, quiet_transformers
from hiera.retrieve.base import ranks_of
from hiera.retrieve.protocol import Hit, Level, Results, StageScore, TraceStep, check_k
from hiera.schema import RERANKER_META, SchemaError, validate

META_FILE = "hiera-reranker.json"
MAX_DEPTH = 1000


class Reranker:
    """A trained cross-encoder plus its calibrated relevance threshold."""

    def __init__(self, model: str | Path, *, batch_size: int = 32, trust_pickle: bool | None = None) -> None:
        offline()
        self.path = resolve_model_path(model)
        check_weights(self.path, trust_pickle)
        meta_path = self.path / META_FILE
        self.meta: dict[str, Any] = {}
        if meta_path.exists():
            try:
                self.meta = loads_json(meta_path.read_text(encoding="utf-8"))
            except (UnicodeDecodeError, json.JSONDecodeError) as e:
                raise HieraError(f"{meta_path} is corrupt ({getattr(e, 'msg', None) or e.reason})") from None
            try:
                validate(self.meta, RERANKER_META)
            except SchemaError as e:
                raise HieraError(f"{meta_path}: {e}") from None
        self.threshold = float(self.meta.get("threshold", 0.5))
        # the cross-encoder's share of a reranked score (1: its probability alone); calibrated by train-reranker
        self.weight = float(self.meta.get("weight", 1.0))
        from sentence_transformers import CrossEncoder

        try:
            with quiet_transformers():
                self.model = CrossEncoder(str(self.path), device="cpu")
        except Exception as e:
            raise HieraError(f"cannot load a cross-encoder from {self.path}: {e}") from None
        if int(getattr(self.model, "num_labels", 1)) != 1:
            raise HieraError(f"{self.path} has {self.model.num_labels} outputs; a reranker needs exactly one")
        self.name = self.path.name
        self.fingerprint = model_fingerprint(self.path)
        self.batch_size = batch_size
        self._lock = threading.Lock()  # the fast tokenizer is not thread-safe (see Encoder)

    def score(self, query: str, texts: Sequence[str]) -> np.ndarray:
        """Relevance probabilities of ``texts`` for ``query``."""
        if not texts:
            return np.zeros(0, dtype=np.float32)
        with self._lock:
            probs = self.model.predict(
                [(query, t) for t in texts], batch_size=self.batch_size, show_progress_bar=False
            )
        return np.asarray(probs, dtype=np.float32).reshape(-1)

    def combine(self, probs: np.ndarray, base: np.ndarray) -> np.ndarray:
        """The reranked score: ``weight · probability + (1 − weight) · base score`` (base min-max over the list).

        A cross-encoder trained in a CPU budget is a useful but imperfect
        judge; the first-stage score it overrules still carries evidence (a
        tuned hybrid DHR is right at top-1 two times in three on SQuAD), so the
        two are interpolated, with the weight calibrated on held-out questions
        (``hiera train-reranker``). Weight 1 is the cross-encoder alone.
        """
        probs = np.asarray(probs, dtype=np.float64)
        if self.weight >= 1.0 or len(probs) == 0:
            return probs.astype(np.float32)
        base = np.asarray(base, dtype=np.float64)
        span = float(base.max() - base.min())
        norm = (base - base.min()) / span if span > 0 else np.ones_like(base)
        return (self.weight * probs + (1.0 - self.weight) * norm).astype(np.float32)


def hit_input(hit: Hit, sep: str = ", ") -> str:
    """The text a reranker sees for a hit: the same titled text the passage encoder sees."""
    return f"{sep.join((hit.title, *hit.section_path))}\n{hit.text}"


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
        self.sep = col.store.title_sep if col is not None else ", "

    def search(self, query: str, k: int = 10, level: Level | None = None, **params: Any) -> Results:
        return self.batch_search([query], k, level, **params)[0]

    def batch_search(
        self, queries: Sequence[str], k: int = 10, level: Level | None = None, **params: Any
    ) -> list[Results]:
        k = check_k(k)
        if level is not None and level not in self.levels:
            raise BadInputError(f"retriever {self.name!r} returns levels {self.levels}, not {level!r}")
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
            trace=[*res.trace, step],
            answer_set=res.answer_set,
        )
