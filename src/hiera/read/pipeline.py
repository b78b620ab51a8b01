"""Retrieve, then read: ``hiera answer`` and ``/answer``, with the trace of both halves.

The answer JSON: ``{"question", "answers": [{"text", "score", "passage_id",
"doc_id", "breadcrumb", "start", "end", "evidence": [...]}], "passages":
[hits as /search gives them], "trace": [...], "retriever", "params"}``, where
``start``/``end`` are character offsets of the answer in its passage's text
and ``evidence`` lists every passage that gave the same answer string. Each
answer and piece of evidence shows its score's parts (``span``: the span
log-probability; ``select``: the weighted passage-selection log-probability;
``rank``: the retrieval-rank prior), and the ``decode`` trace step the
weights that made them.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from hiera.errors import BadInputError
from hiera.read.decode import Answer, Candidate
from hiera.read.reader import Reader
from hiera.results import Hit, Results, TraceStep, with_steps


@dataclass
class AnswerResults:
    question: str
    answers: list[dict[str, Any]]
    results: Results
    reader: dict[str, Any] = field(default_factory=dict)
    trace: list[TraceStep] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "question": self.question,
            "answers": self.answers,
            "passages": [h.to_dict() for h in self.results.hits],
            "retriever": self.results.retriever,
            "params": self.results.params,
            "reader": self.reader,
            "trace": [asdict(s) for s in self.trace],
        }


def title_line(hit: Hit, sep: str = ", ") -> str:
    """The passage's title as the reader was trained to see it (document title and section path)."""
    return sep.join((hit.title, *hit.section_path))


def _evidence(c: Candidate, hits: list[Hit]) -> dict[str, Any]:
    h = hits[c.passage]
    return {"passage_id": h.passage_id, "doc_id": h.doc_id, "breadcrumb": h.breadcrumb(), "passage_rank": h.rank,
            "start": c.start, "end": c.end, "score": round(c.score, 6), **_parts(c)}


def _parts(c: Candidate) -> dict[str, float]:
    return {"span": round(c.span, 6), "select": round(c.select, 6), "rank": round(c.rank, 6)}


def answer_dicts(answers: list[Answer], hits: list[Hit]) -> list[dict[str, Any]]:
    out = []
    for a in answers:
        h = hits[a.passage]
        out.append({
            "text": a.text, "score": round(a.score, 6), "passage_id": h.passage_id, "doc_id": h.doc_id,
            "breadcrumb": h.breadcrumb(), "passage_rank": h.rank, "start": a.start, "end": a.end,
            **_parts(a.evidence[0]), "evidence": [_evidence(c, hits) for c in a.evidence],
        })
    return out


def read_results(reader: Reader, results: Results, sep: str = ", ", **read_params: Any) -> AnswerResults:
    """Read ``results``' passages (one batch) into answers; the trace is the search's plus the reader's."""
    if results.level != "passage":
        raise BadInputError(f"the reader reads passages; {results.retriever!r} returned {results.level}s")
    hits = [h for h in results.hits if h.passage_id is not None]
    t = time.perf_counter()
    params = reader.params(read_params)
    lg = reader.logits(results.query, [(title_line(h, sep), h.text) for h in hits], params["part_words"])
    t_dec = time.perf_counter()
    answers = reader.decode(lg, **read_params)
    read = TraceStep("read", {"passages": len(hits), "windows": len(lg.windows), "reader": reader.name}, lg.ms)
    weights = {k: params[k] for k in ("passage_weight", "rank_weight", "merge")}
    decode = TraceStep("decode", {"answers": len(answers), **weights}, (time.perf_counter() - t_dec) * 1000.0)
    trace = with_steps(results.trace, read, decode)
    return AnswerResults(
        question=results.query,
        answers=answer_dicts(answers, hits),
        results=results,
        reader={"name": reader.name, "params": {k: v for k, v in params.items() if k != "reader"},
                "ms": round((time.perf_counter() - t) * 1000.0, 3)},
        trace=trace,
    )


def answer(
    retriever: Any,
    reader: Reader,
    question: str,
    k: int = 10,
    search_params: Mapping[str, Any] | None = None,
    read_params: Mapping[str, Any] | None = None,
    sep: str = ", ",
) -> AnswerResults:
    """Retrieve ``k`` passages with ``retriever`` and read them."""
    if "passage" not in retriever.spec.levels:
        raise BadInputError(f"the reader reads passages; retriever {retriever.name!r} ranks documents only")
    res = retriever.search(question, k=k, level="passage", **dict(search_params or {}))
    return read_results(reader, res, sep, **dict(read_params or {}))
