"""Shared machinery for retrievers: validation, parameters, hit building.

A concrete retriever implements ``_search(q, k, level, params, trace)`` for
one :class:`~hiera.query.Query` returning hits; ``_prepare(queries, params)``
computes what the whole batch shares in one go (query vectors, a method's own
prepared state) as a typed :class:`~hiera.query.QueryBatch`, which is how
``batch_search`` saves encoder calls. A method whose stage is batched
(DHR's passage stage) overrides ``_search_batch`` instead.

``filter=EXPR`` (:mod:`hiera.index.filters`) is compiled once per build and
travels in the batch (``QueryBatch.filter``); a method that honours it sets
``filters = True`` and searches only the allowed documents and passages, and
every other method refuses it in one line rather than filter its results
afterwards. A filter that allows nothing answers an empty list with a note.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Literal, NamedTuple

import numpy as np

from hiera.collection import Collection
from hiera.errors import BadInputError, HieraError
from hiera.index.filters import compile_filter
from hiera.query import DOC, PASSAGE, Allowed, Query, QueryBatch
from hiera.results import Hit, Results, StageScore, TraceStep, check_k, check_level, check_query
from hiera.spec import Level, MethodSpec, method


class Found(NamedTuple):
    """What a set method's ``_search`` returns: its hits and the chosen set (document ids, best first).

    A ranking method returns its hits alone; :attr:`Results.answer_set` is then ``None``.
    """

    hits: list[Hit]
    answer_set: list[str] | None = None


class BaseRetriever:
    """Validation and result assembly common to every method.

    A subclass sets ``name`` to its registry entry in :mod:`hiera.spec`; its
    levels, parameters and their bounds come from there, never from the class.
    Defaults are layered: the declaration's, then the build's (``hiera build
    --set``), then ``hiera tune``'s, then the constructor's keyword arguments.
    """

    name = "base"
    filters = False  # whether the method searches inside a filter (``batch_search(filter=…)``)
    uses_dense = True  # whether it searches the dense indexes (BM25-only methods say False: their provenance omits them)
    uses_passage_stage = False  # whether it scores candidates with the collection's passage-stage primitive

    def __init__(self, collection: Collection, **defaults: Any) -> None:
        self.col = collection
        self.spec: MethodSpec = method(self.name)
        self.levels: tuple[Level, ...] = self.spec.levels
        self.default_level: Level = self.spec.default_level
        self._loaded: dict[tuple[str, str], Any] = {}  # (kind, resolved directory) → model, see _load_dir
        built = collection.method_defaults(self.name)
        self.defaults = self._check_params({**self.spec.defaults(), **built, **defaults})

    def _check_params(self, params: dict[str, Any]) -> dict[str, Any]:
        return self.spec.check(params)

    def _load_dir(self, kind: str, path: str | None, load: Callable[[str], Any], hint: str) -> Any:
        """The model directory a path parameter names, loaded once per retriever; ``None`` when none is named.

        ``kind`` names it in the error (``linking: reranker '…' is not a directory (hint)``).
        """
        if not path:
            return None
        key = (kind, str(Path(path).expanduser().resolve()))
        if key not in self._loaded:
            if not Path(key[1]).is_dir():
                raise HieraError(f"{self.name}: {kind} {path!r} is not a directory ({hint})")
            self._loaded[key] = load(key[1])
        return self._loaded[key]

    def _level(self, level: Level | None) -> Level:
        level = level or self.default_level
        check_level(self.name, self.levels, level)
        return level

    def search(self, query: str, k: int = 10, level: Level | None = None, **params: Any) -> Results:
        return self.batch_search([query], k, level, **params)[0]

    def compile_filter(self, expr: str | Allowed | None) -> Allowed | None:
        """``expr`` checked against this collection and compiled (kept per build); ``None`` for no filter.

        A method that cannot search inside a filter refuses it here, before any work.
        """
        if expr is None or (isinstance(expr, str) and not expr.strip()):
            return None
        if not self.filters:
            raise BadInputError(f"{self.name} cannot search with a filter yet")
        return compile_filter(self.col, expr)

    def batch_search(
        self, queries: Sequence[str], k: int = 10, level: Level | None = None, filter: str | Allowed | None = None,
        **params: Any,
    ) -> list[Results]:
        if getattr(self.col, "closed", False):
            raise HieraError(f"the collection {self.col.root} was closed; open it again to search it")
        self.col.check_method(self.name)
        if isinstance(queries, str):  # a str is a sequence too: each character would be searched
            raise BadInputError("batch_search takes a list of queries; search one with search()")
        qs = [check_query(q) for q in queries]
        k = check_k(k)
        lvl = self._level(level)
        p = {**self.defaults, **self._check_params({k_: v for k_, v in params.items() if v is not None})}
        if not qs:
            return []
        t = time.perf_counter()
        allowed = self.compile_filter(filter)
        filter_ms = (time.perf_counter() - t) * 1000
        if allowed is not None and allowed.n_passages == 0 and (lvl == "passage" or allowed.n_docs == 0):
            note = {**allowed.summary(), "note": "the filter allows nothing in this collection: no results"}
            return [Results(query=q, level=lvl, hits=[], retriever=self.name, params=p,
                            trace=[TraceStep("filter", note, filter_ms), TraceStep("answered-by", self.answered_by())])
                    for q in qs]
        batch = self._prepare(qs, p)
        # a build with tombstones: every search runs inside its live rows (a filter already does, compile_filter)
        batch.filter = allowed if allowed is not None else self.col.live
        traces: list[list[TraceStep]] = [[] for _ in qs]
        if allowed is not None:
            detail = {**allowed.summary(), **self._filter_strategy(allowed, p, lvl)}
            for trace in traces:
                trace.append(TraceStep("filter", detail, filter_ms))
        if batch.encode_ms:
            for trace in traces:
                trace.append(TraceStep("encode-query", {"batched": len(qs)}, batch.encode_ms))
        out = []
        for q, trace, found in zip(batch, traces, self._search_batch(batch, k, lvl, p, traces), strict=True):
            hits, answer_set = (found.hits, found.answer_set) if isinstance(found, Found) else (found, None)
            trace.append(TraceStep("answered-by", self.answered_by(trace)))
            out.append(Results(query=q.text, level=lvl, hits=hits, retriever=self.name, params=p, trace=trace,
                               answer_set=answer_set))
        return out

    def answered_by(self, trace: Sequence[TraceStep] = ()) -> dict[str, Any]:
        """Where this search ran: the device, and for what the method used, how the dense indexes were searched and
        their kinds and which passage-stage backend scored the candidates. Nothing it did not use: the passage stage
        is named only when ``trace`` shows it ran (DHR at document level returns its document stage alone)."""
        placement = self.col.placement
        out: dict[str, Any] = {"device": placement.device}
        ran_passage_stage = self.uses_passage_stage and any(s.name == "passage-stage" for s in trace)
        if self.uses_dense and self.col.faiss_types:  # a method that uses dense vectors when the build has them
            out.update(dense_search=placement.dense_search, index=dict(self.col.faiss_types))
        elif self.uses_passage_stage:  # hierarchical BM25: documents by BM25, then BM25 over their passages
            out["index"] = {"doc": "bm25", **({"passage": "bm25"} if ran_passage_stage else {})}
        else:
            out["index"] = {"passage": "bm25"} if "passage" in self.levels else {"doc": "bm25"}
        if ran_passage_stage:
            out["passage_stage"] = self.col.passage_backend
        return out

    def _prepare(self, queries: list[str], params: dict[str, Any]) -> QueryBatch:
        return QueryBatch(queries, params)

    def _filter_strategy(self, allowed: Allowed, params: dict[str, Any], level: Level) -> dict[str, Any]:
        """How this method searches inside the filter (the trace's ``filter`` step says it)."""
        return {}

    def _search_batch(
        self, batch: QueryBatch, k: int, level: Level, params: dict[str, Any], traces: list[list[TraceStep]]
    ) -> list[list[Hit] | Found]:
        """Every query of the batch, one at a time (a method with a batched stage overrides this)."""
        return [self._search(q, k, level, params, trace) for q, trace in zip(batch, traces, strict=True)]

    def _query_vectors(
        self, queries: list[str], params: dict[str, Any], level: Literal["passage", "doc"] = "passage"
    ) -> QueryBatch:
        """A batch with one encoder's query vectors (``qp``: passage encoder, ``qd``: document encoder), one call."""
        encoder = self.col.passage_encoder if level == "passage" else self.col.doc_encoder  # loaded before the clock
        t = time.perf_counter()
        vecs = encoder.encode_query(queries)
        ms = (time.perf_counter() - t) * 1000 / len(queries)
        return QueryBatch(queries, params, {PASSAGE if level == "passage" else DOC: vecs}, ms)

    def _search(
        self, q: Query, k: int, level: Level, params: dict[str, Any], trace: list[TraceStep]
    ) -> list[Hit] | Found:
        raise NotImplementedError

    # -- hit assembly ---------------------------------------------------
    def passage_hits(
        self,
        positions: np.ndarray,
        scores: np.ndarray,
        stages: dict[str, tuple[np.ndarray, np.ndarray]] | None = None,
    ) -> list[Hit]:
        """Hits for passage positions; ``stages[name] = (scores, ranks)`` aligned with positions."""
        passages = self.col.passages_at(positions)
        hits = []
        for i, (p, s) in enumerate(zip(passages, scores, strict=True)):
            st = {name: StageScore(float(v[0][i]), int(v[1][i])) for name, v in (stages or {}).items()}
            hits.append(
                Hit(
                    rank=i + 1,
                    score=float(s),
                    doc_id=p.doc_id,
                    title=p.doc_title,
                    passage_id=p.id,
                    section_path=p.section_path,
                    text=p.text,
                    stages=st,
                )
            )
        return hits

    def doc_hits(
        self,
        doc_positions: np.ndarray,
        scores: np.ndarray,
        stages: dict[str, tuple[np.ndarray, np.ndarray]] | None = None,
        best_passages: np.ndarray | None = None,
    ) -> list[Hit]:
        """Document-level hits; ``best_passages`` (passage positions or -1) adds evidence."""
        docs = self.col.docs_at(doc_positions)
        evidence = {}
        if best_passages is not None:
            valid = [int(b) for b in best_passages if b >= 0]
            evidence = {int(b): p for b, p in zip(valid, self.col.passages_at(valid), strict=True)}
        hits = []
        for i, (d, s) in enumerate(zip(docs, scores, strict=True)):
            st = {name: StageScore(float(v[0][i]), int(v[1][i])) for name, v in (stages or {}).items()}
            hit = Hit(rank=i + 1, score=float(s), doc_id=d.id, title=d.title, stages=st)
            if best_passages is not None and best_passages[i] >= 0:
                p = evidence[int(best_passages[i])]
                hit.passage_id, hit.section_path, hit.text = p.id, p.section_path, p.text
                hit.evidence = [p.id]
            else:
                hit.text = d.summary
            hits.append(hit)
        return hits
