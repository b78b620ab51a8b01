"""Retrieval and set-answer metrics, defined as the benchmarks' own scripts do.

* :func:`topk_accuracy` — DPR's "top-k retrieval accuracy": the share of
  questions with at least one answer-bearing passage among the first k.
* :func:`doc_topk` — the same at document level, over *distinct* documents
  (a passage ranking usually repeats documents).
* :func:`ranking_metrics` — recall@k, MRR@10, nDCG@10, MAP@100 on graded
  judgements (BEIR), computed by ranx rather than by hand so that they agree
  with trec_eval-style tools.
* :func:`set_metrics`, :func:`recall_at_k`, :func:`mrecall_at_k` — QUEST's
  official ``run_eval.py`` / ``analyze_retriever.py`` definitions.
* :func:`latency_percentiles` — p50/p95 query latency.

ranx (and numba behind it) is imported inside :func:`ranking_metrics` only.
"""

from __future__ import annotations

import math
import warnings
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from hiera.errors import BadInputError

RANKING_EXTRA = ("mrr@10", "ndcg@10", "map@100")
QUEST_KS = (20, 50, 100, 1000)


def _check_ks(ks: Iterable[int]) -> list[int]:
    out = list(ks)
    if not out:
        raise BadInputError("no cut-off k given")
    for k in out:
        if not isinstance(k, int) or isinstance(k, bool) or k <= 0:
            raise BadInputError(f"k must be a positive integer, got {k!r}")
    return out


def topk_accuracy(
    hit_lists: Sequence[Sequence[bool]], ks: Iterable[int] = (1, 5, 20, 100)
) -> dict[str, float]:
    """``top{k}``: share of questions with a hit within their first k results.

    ``hit_lists[i][r]`` says whether the r-th result (0-based) of question i
    holds an answer (see :func:`hiera.eval.match.hit_list`). A question with
    fewer than k results simply has fewer chances.
    """
    ks = _check_ks(ks)
    if not hit_lists:
        raise BadInputError("no questions to evaluate")
    first = [next((r for r, h in enumerate(hits) if h), None) for hits in hit_lists]
    n = len(first)
    return {f"top{k}": sum(1 for f in first if f is not None and f < k) / n for k in ks}


def distinct(ids: Iterable[str]) -> list[str]:
    """``ids`` in first-seen order without repeats."""
    seen: set[str] = set()
    out: list[str] = []
    for i in ids:
        if i not in seen:
            seen.add(i)
            out.append(i)
    return out


def doc_topk(
    ranked_doc_ids: Sequence[Sequence[str]],
    gold_docs: Sequence[set[str]],
    ks: Iterable[int] = (1, 5, 20, 100),
) -> dict[str, float]:
    """``doc_top{k}``: share of questions with a gold document among the first k distinct documents.

    A question without gold documents (judged, but nothing relevant) is left out of the mean, as the ranking
    metrics leave it out: no retriever can find its gold."""
    ks = _check_ks(ks)
    if len(ranked_doc_ids) != len(gold_docs):
        raise BadInputError(f"{len(ranked_doc_ids)} rankings but {len(gold_docs)} gold sets")
    if not ranked_doc_ids:
        raise BadInputError("no questions to evaluate")
    if not any(gold_docs):
        raise BadInputError("no question has a gold document")
    first: list[int | None] = []
    for ranked, gold in zip(ranked_doc_ids, gold_docs, strict=True):
        if not gold:
            continue
        docs = distinct(ranked)
        first.append(next((r for r, d in enumerate(docs) if d in gold), None))
    n = len(first)
    return {f"doc_top{k}": sum(1 for f in first if f is not None and f < k) / n for k in ks}


def _strict_scores(ranking: Mapping[str, Any], qid: str) -> dict[str, float]:
    """Replace scores by strictly decreasing ones that keep the ranking.

    ranx sorts each query's documents by score and breaks ties in an
    unspecified (not input-stable) order, so two runs with equal scores could
    evaluate differently. We sort by score, descending, keeping the caller's
    order among ties (dict order = the retriever's rank order), and hand ranx
    ``n, n-1, …, 1``. Scores must be finite numbers.
    """
    items: list[tuple[str, float]] = []
    for doc_id, score in ranking.items():
        try:
            s = float(score)
        except (TypeError, ValueError):
            raise BadInputError(f"query {qid!r}: score of {doc_id!r} is not a number: {score!r}") from None
        if not math.isfinite(s):
            raise BadInputError(f"query {qid!r}: score of {doc_id!r} is {s}")
        items.append((str(doc_id), s))
    order = sorted(range(len(items)), key=lambda i: -items[i][1])  # stable: ties keep input order
    n = len(order)
    return {items[i][0]: float(n - r) for r, i in enumerate(order)}


def ranking_metrics(
    run: Mapping[str, Mapping[str, float]],
    qrels: Mapping[str, Mapping[str, int]],
    ks: Iterable[int] = (1, 5, 10, 20, 100),
) -> dict[str, float]:
    """``recall@k`` for each k plus ``mrr@10``, ``ndcg@10`` and ``map@100``, via ranx.

    Means are over the queries of ``qrels`` that have at least one document
    with relevance > 0 (metrics are undefined without one; BEIR's qrels never
    hold such queries). How ranx's quirks are handled:

    * a judged query missing from ``run`` (or with no results) counts 0 on
      every metric — ranx would otherwise refuse mismatched query sets;
    * run queries without judgements are ignored;
    * scores are made floats and strictly decreasing (see :func:`_strict_scores`),
      so ties keep the order the run gives them instead of ranx's arbitrary one;
    * relevance is graded (nDCG uses the grade as gain, trec_eval style);
      grades <= 0 are not relevant;
    * ranx sets numba's thread count to 1 for fewer than 10 queries and never
      resets it; we restore it afterwards.
    """
    ks = _check_ks(ks)
    judged: dict[str, dict[str, int]] = {}
    for qid, rels in qrels.items():
        clean = {str(d): int(r) for d, r in rels.items()}
        if any(r > 0 for r in clean.values()):
            judged[str(qid)] = clean
    if not judged:
        raise BadInputError("no query has a relevant document in the qrels")
    names = [f"recall@{k}" for k in ks] + list(RANKING_EXTRA)

    prepared = {qid: _strict_scores(run.get(qid, {}), qid) for qid in judged}
    if not any(prepared.values()):
        return dict.fromkeys(names, 0.0)

    import numba
    from numba.core.errors import NumbaTypeSafetyWarning
    from ranx import Qrels, Run, evaluate

    threads = numba.get_num_threads()
    try:
        with warnings.catch_warnings():
            # ranx casts hashed doc ids uint64 -> int64 inside numba; harmless, but noisy.
            warnings.simplefilter("ignore", NumbaTypeSafetyWarning)
            scores = evaluate(Qrels.from_dict(judged), Run.from_dict(prepared), names, make_comparable=True)
    finally:
        numba.set_num_threads(threads)
    if not isinstance(scores, dict):  # ranx returns a bare float for a single metric
        scores = {names[0]: scores}
    return {name: float(scores[name]) for name in names}


def _prf(pred: set[str], gold: set[str]) -> tuple[float, float, float]:
    tp = len(gold & pred)
    if not tp:
        return 0.0, 0.0, 0.0
    p = tp / len(pred)
    r = tp / len(gold)
    return p, r, 2 * p * r / (p + r)


def _check_gold(gold: Mapping[str, set[str]]) -> None:
    if not gold:
        raise BadInputError("no gold queries to evaluate")
    for qid, docs in gold.items():
        if not docs:
            raise BadInputError(f"query {qid!r} has an empty gold set")  # QUEST raises too


def set_metrics(
    pred: Mapping[str, Iterable[str]],
    gold: Mapping[str, set[str]],
    templates: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """QUEST's end-to-end metrics: mean per-query precision, recall and F1 of sets.

    As QUEST's ``run_eval.py``: with no correct document all three are 0 (so an
    empty prediction has precision 0, not 1). Means are over ``gold`` queries;
    a query missing from ``pred`` counts as an empty prediction (QUEST's script
    would stop with a KeyError). With ``templates`` (query id -> QUEST template,
    e.g. ``"_ and _"``) the same means are given per template, with their
    query counts, under ``by_template``; queries without one go to ``"(none)"``.
    """
    _check_gold(gold)
    rows: list[tuple[str, float, float, float]] = []
    for qid, gdocs in gold.items():
        p, r, f = _prf(set(pred.get(qid, ())), set(gdocs))
        tpl = templates.get(qid, "(none)") if templates is not None else ""
        rows.append((tpl, p, r, f))

    def avg(sub: list[tuple[str, float, float, float]]) -> dict[str, float]:
        n = len(sub)
        return {
            "avg_precision": sum(x[1] for x in sub) / n,
            "avg_recall": sum(x[2] for x in sub) / n,
            "avg_f1": sum(x[3] for x in sub) / n,
        }

    out: dict[str, Any] = {**avg(rows), "count": len(rows), "by_template": {}}
    if templates is not None:
        groups: dict[str, list[tuple[str, float, float, float]]] = defaultdict(list)
        for row in rows:
            groups[row[0]].append(row)
        out["by_template"] = {t: {**avg(g), "count": len(g)} for t, g in sorted(groups.items())}
    return out


def recall_at_k(
    ranked: Mapping[str, Sequence[str]], gold: Mapping[str, set[str]], ks: Iterable[int] = QUEST_KS
) -> dict[str, float]:
    """``recall@k``: mean over gold queries of |gold ∩ top-k| / |gold| (QUEST ``analyze_retriever.py``).

    The top k is the first k entries of the list as given (QUEST cuts before
    deduplicating); a query missing from ``ranked`` scores 0.
    """
    ks = _check_ks(ks)
    _check_gold(gold)
    out = {}
    for k in ks:
        vals = [len(set(g) & set(ranked.get(q, ())[:k])) / len(g) for q, g in gold.items()]
        out[f"recall@{k}"] = sum(vals) / len(vals)
    return out


def mrecall_at_k(
    ranked: Mapping[str, Sequence[str]], gold: Mapping[str, set[str]], ks: Iterable[int] = QUEST_KS
) -> dict[str, float]:
    """``mrecall@k``: share of gold queries whose *whole* gold set is within the top k (QUEST)."""
    ks = _check_ks(ks)
    _check_gold(gold)
    out = {}
    for k in ks:
        vals = [set(g) <= set(ranked.get(q, ())[:k]) for q, g in gold.items()]
        out[f"mrecall@{k}"] = sum(vals) / len(vals)
    return out


def latency_percentiles(ms: Sequence[float]) -> dict[str, float]:
    """Median and 95th percentile of per-query latencies in milliseconds (linear interpolation)."""
    if len(ms) == 0:
        raise BadInputError("no latencies to summarize")
    p50, p95 = np.percentile(np.asarray(ms, dtype=float), [50, 95], method="linear")
    return {"latency_ms_p50": float(p50), "latency_ms_p95": float(p95)}


__all__ = [
    "distinct",
    "doc_topk",
    "latency_percentiles",
    "mrecall_at_k",
    "ranking_metrics",
    "recall_at_k",
    "set_metrics",
    "topk_accuracy",
]
