"""What every search returns: typed hits with their provenance, and the trace of the steps that made them.

A leaf module (it imports only :mod:`hiera.spec` and :mod:`hiera.errors`):
retrievers, readers, the linking pipeline, the server and the evaluators all
exchange these types, so none of them has to import another to share them.

Design notes:

* Each :class:`Hit` carries per-stage scores and ranks (``stages``), so a
  result can be explained (document stage, passage stage, BM25, rerank …).
* :class:`Results` carries a ``trace``: an ordered list of :class:`TraceStep`
  that multi-step pipelines (entity linking + query decomposition, several
  sub-queries, rerank stages) fill with what each step did. Single-stage
  retrievers record their stages there too, with timings.
* Layer-wise query encoders (FetchHR) issue several query vectors per question:
  a retriever built on them returns one :class:`Results` whose trace has one
  step per layer and whose hits say which step found them (``stages``).
* Set-valued answers (QUEST) are :class:`Results` at ``level="doc"`` whose
  ``answer_set`` holds the chosen document ids; each hit keeps its evidence
  passages in ``evidence``.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from typing import Any

from hiera.errors import BadInputError
from hiera.spec import MAX_K, MAX_QUERY_CHARS, Level


@dataclass(frozen=True)
class StageScore:
    """A hit's score and 1-based rank in one stage of a pipeline; rank 0: that stage's list did not hold the hit
    (a fusion's other list found it), and its score 0.0 is a placeholder."""

    score: float
    rank: int


@dataclass
class Hit:
    """One ranked result with its provenance.

    For ``level="doc"`` results ``passage_id`` is the best passage that supports
    the document when the method knows one, else ``None``. A set method
    (``sets``) fills ``support`` for each member: constraint -> the sentence
    that supports it (``evidence`` lists those sentences' passage ids).
    """

    rank: int
    score: float
    doc_id: str
    title: str
    passage_id: str | None = None
    section_path: tuple[str, ...] = ()
    text: str = ""
    stages: dict[str, StageScore] = field(default_factory=dict)
    evidence: list[str] = field(default_factory=list)
    # set queries: for each constraint a member satisfies, the sentence of the document that best supports it
    support: dict[str, str] = field(default_factory=dict)

    def breadcrumb(self) -> str:
        return " › ".join((self.title, *self.section_path))

    def reason(self) -> str:
        """One line saying why this hit ranks where it does."""
        parts = [f"{name} {s.score:.3f} (#{s.rank})" if s.rank else f"{name} not in its list"
                 for name, s in self.stages.items()]
        return "; ".join(parts) if parts else f"score {self.score:.3f}"

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["section_path"] = list(self.section_path)
        d["breadcrumb"] = self.breadcrumb()
        d["reason"] = self.reason()
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Hit:
        """Inverse of :meth:`to_dict` (a hit read back from the HTTP API: :mod:`hiera.client`)."""
        return cls(
            rank=int(d["rank"]),
            score=float(d["score"]),
            doc_id=str(d["doc_id"]),
            title=str(d["title"]),
            passage_id=d.get("passage_id"),
            section_path=tuple(d.get("section_path") or ()),
            text=str(d.get("text") or ""),
            stages={n: StageScore(float(s["score"]), int(s["rank"])) for n, s in (d.get("stages") or {}).items()},
            evidence=list(d.get("evidence") or []),
            support=dict(d.get("support") or {}),
        )


@dataclass
class TraceStep:
    """What one step of a pipeline did: its name, input, output size, time."""

    name: str
    detail: dict[str, Any] = field(default_factory=dict)
    ms: float = 0.0


def with_steps(trace: Sequence[TraceStep], *steps: TraceStep) -> list[TraceStep]:
    """``trace`` with ``steps`` added as its last stages: a trace ends with its ``answered-by`` step, which says
    what served the whole pipeline, so a stage added after a search (a reranker, a reader) goes before it."""
    last = [s for s in trace if s.name == "answered-by"]
    return [*(s for s in trace if s.name != "answered-by"), *steps, *last]


@dataclass
class Results:
    """The ranked hits for one query plus the trace that produced them."""

    query: str
    level: Level
    hits: list[Hit]
    retriever: str
    params: dict[str, Any] = field(default_factory=dict)
    trace: list[TraceStep] = field(default_factory=list)
    answer_set: list[str] | None = None

    def __iter__(self) -> Iterator[Hit]:
        return iter(self.hits)

    def __len__(self) -> int:
        return len(self.hits)

    def __getitem__(self, i: int) -> Hit:
        return self.hits[i]

    def timings(self) -> dict[str, float]:
        return {s.name: s.ms for s in self.trace}

    def to_dict(self) -> dict[str, Any]:
        return {
            "query": self.query,
            "level": self.level,
            "retriever": self.retriever,
            "params": self.params,
            "hits": [h.to_dict() for h in self.hits],
            "trace": [asdict(s) for s in self.trace],
            "answer_set": self.answer_set,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Results:
        """Inverse of :meth:`to_dict` (``/search``'s body)."""
        return cls(
            query=str(d["query"]),
            level=d["level"],
            hits=[Hit.from_dict(h) for h in d.get("hits") or []],
            retriever=str(d["retriever"]),
            params=dict(d.get("params") or {}),
            trace=[TraceStep(str(t["name"]), dict(t.get("detail") or {}), float(t.get("ms") or 0.0))
                   for t in d.get("trace") or []],
            answer_set=d.get("answer_set"),
        )


def check_query(query: str) -> str:
    """Reject what no retriever can answer, with a clear message."""
    if not isinstance(query, str) or not query.strip():
        raise BadInputError("the query is empty")
    if len(query) > MAX_QUERY_CHARS:
        raise BadInputError(f"the query is {len(query)} characters long; the limit is {MAX_QUERY_CHARS}")
    try:
        query.encode("utf-8")
    except UnicodeEncodeError as e:  # a lone surrogate (a mis-decoded byte): no tokenizer can read it
        raise BadInputError(f"the query is not valid Unicode text ({e.reason} at character {e.start})") from None
    return query.strip()


def check_k(k: int, limit: int = MAX_K) -> int:
    if not isinstance(k, int) or isinstance(k, bool) or k <= 0:
        raise BadInputError(f"k must be a positive integer, got {k!r}")
    if k > limit:
        raise BadInputError(f"k={k} is larger than the limit {limit}")
    return k


def check_level(name: str, levels: tuple[Level, ...] | list[Level], level: str) -> None:
    """One wording on every surface for a level a retriever does not rank."""
    if level not in levels:
        raise BadInputError(f"retriever {name!r} ranks {' and '.join(f'{lv}s' for lv in levels)}, not {level}s")


@contextmanager
def timed(trace: list[TraceStep], name: str, **detail: Any) -> Iterator[TraceStep]:
    """Append a :class:`TraceStep` whose ``ms`` covers the ``with`` body."""
    step = TraceStep(name=name, detail=dict(detail))
    t0 = time.perf_counter()
    try:
        yield step
    finally:
        step.ms = (time.perf_counter() - t0) * 1000.0
        trace.append(step)
