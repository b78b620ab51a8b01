"""Tune DHR's λ and k1 the way the paper did: grid search for top-20 (or any top-k).

λ goes over [0, 2] in steps of 0.1, then in steps of 0.01 within ±0.05 of
the best; k1 over a given list. Each question's candidates (the documents of
the largest k1 and all their passages' scores) are computed once; every
(λ, k1) pair then only re-ranks numbers, and answer matching is memoized per
(question, passage), so the grid costs little more than one evaluation.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from tqdm import tqdm

from hiera.errors import BadInputError
from hiera.eval.match import has_answer
from hiera.eval.questions import Question
from hiera.index.build import live_build_dir
from hiera.index.manifest import MANIFEST, Manifest, write_json_atomic
from hiera.index.select import topk
from hiera.retrieve.dhr import DhrRetriever


@dataclass
class TuneResult:
    lam: float
    k1: int
    target: float  # top-``target_k`` accuracy at the best (λ, k1): what the grid maximized
    top1: float  # the tie-breaker
    grid: list[dict[str, float]]
    target_k: int = 20


def coarse_grid() -> list[float]:
    return [round(0.1 * i, 2) for i in range(21)]


def fine_grid(best: float) -> list[float]:
    return [v for v in (round(best + 0.01 * i, 2) for i in range(-5, 6)) if 0.0 <= v <= 2.0]


def tune_dhr(
    col: Any,
    questions: Sequence[Question],
    k1s: Sequence[int] = (10, 20, 50, 100),
    doc_stage: str | None = None,
    target_k: int = 20,
    doc_alpha: float | None = None,
    progress: bool = True,
    log: Callable[[str], None] = lambda m: None,
) -> TuneResult:
    if not questions:
        raise BadInputError("no questions to tune on")
    if any(not q.answers for q in questions):
        raise BadInputError("tuning needs questions with answers")
    k1s = sorted({int(k) for k in k1s})
    if not k1s or k1s[0] <= 0:
        raise BadInputError("k1 values must be positive integers")
    r = DhrRetriever(col)
    stage = doc_stage or r.defaults["doc_stage"]
    texts = [q.text for q in questions]
    params = {**r.defaults, "doc_stage": stage}
    if doc_alpha is not None:
        params["doc_alpha"] = float(doc_alpha)
    ctxs = []
    for i in range(0, len(texts), 64):
        ctxs.extend(r._prepare(texts[i : i + 64], params))
    cands = [
        r.candidates(q, ctx, max(k1s), stage)
        for q, ctx in tqdm(zip(texts, ctxs, strict=True), total=len(texts), desc="candidates", disable=not progress, leave=False)
    ]
    memo: dict[tuple[int, int], bool] = {}

    def answer_at(qi: int, pos: int) -> bool:
        key = (qi, pos)
        if key not in memo:
            p = col.passages_at([pos])[0]
            memo[key] = has_answer(questions[qi].answers, p.text, questions[qi].answer_mode)
        return memo[key]

    def score(lam: float, k1: int) -> tuple[float, float]:
        hit_k = hit_1 = 0
        for qi, c in enumerate(cands):
            keep = c.per_doc < k1
            final = c.passage_scores[keep] + lam * c.doc_scores[c.per_doc[keep]]
            sel, _ = topk(final, target_k)
            pos = c.passages[keep][sel]
            flags = [answer_at(qi, int(p)) for p in pos]
            hit_k += any(flags)
            hit_1 += bool(flags[:1] and flags[0])
        n = len(cands)
        return hit_k / n, hit_1 / n

    grid: list[dict[str, float]] = []
    best = (-1.0, -1.0, 0.0, 0)
    for k1 in k1s:
        coarse = {lam: score(lam, k1) for lam in coarse_grid()}
        lam0 = max(coarse, key=lambda v: (coarse[v][0], coarse[v][1], -v))
        scores = {**coarse, **{lam: score(lam, k1) for lam in fine_grid(lam0) if lam not in coarse}}
        for lam, (t20, t1) in sorted(scores.items()):
            grid.append({"lambda": lam, "k1": k1, f"top{target_k}": t20, "top1": t1})
            if (t20, t1) > (best[0], best[1]):
                best = (t20, t1, lam, k1)
        lam_k1 = max(scores, key=lambda v: (scores[v], -v))
        log(f"k1={k1}: best λ={lam_k1} top{target_k}={scores[lam_k1][0]:.4f} top1={scores[lam_k1][1]:.4f}")
    return TuneResult(lam=best[2], k1=best[3], target=best[0], top1=best[1], grid=grid, target_k=target_k)


def tune_doc_alpha(
    col: Any, questions: Sequence[Question], alphas: Sequence[float] | None = None, progress: bool = True
) -> tuple[float, dict[float, float]]:
    """α of the ``hybrid-max`` document stage that maximizes document top-1 (gold documents needed).

    Both components are computed once per question; each α only re-weights them.
    Ties go to the α nearest 0.5 (neither signal alone).
    """
    from hiera.retrieve.docstage import HYBRID_DEPTH, hybrid_components

    qs = [q for q in questions if q.gold_docs]
    if not qs:
        raise BadInputError("tuning the document stage needs questions with gold documents")
    alphas = list(alphas) if alphas is not None else [round(0.05 * i, 2) for i in range(21)]
    r = DhrRetriever(col)
    doc_ids = [d.id for d in col.store.iter_docs()]
    hits = dict.fromkeys(alphas, 0)
    ctxs = []
    for i in range(0, len(qs), 64):
        ctxs.extend(r._prepare([q.text for q in qs[i : i + 64]], {**r.defaults, "doc_stage": "hybrid-max"}))
    for q, ctx in tqdm(zip(qs, ctxs, strict=True), total=len(qs), desc="doc alpha", disable=not progress, leave=False):
        docs, b, d = hybrid_components(col, q.text, ctx, HYBRID_DEPTH)
        if len(docs) == 0:
            continue
        for a in alphas:
            hits[a] += doc_ids[int(docs[int(np.argmax(a * b + (1 - a) * d))])] in q.gold_docs
    scores = {a: hits[a] / len(qs) for a in alphas}
    best = max(alphas, key=lambda a: (scores[a], -abs(a - 0.5)))
    return best, scores


def save_defaults(root: Any, lam: float, k1: int, doc_alpha: float | None = None) -> Manifest:
    """Write the tuned values into the live index manifest as its new defaults."""
    build_dir = live_build_dir(root)
    if build_dir is None:
        raise BadInputError(f"{root} has no index to tune")
    m = Manifest.read(build_dir)
    m.defaults = {**m.defaults, "lambda": float(lam), "k1": int(k1)}
    if doc_alpha is not None:
        m.doc_stage = {**m.doc_stage, "alpha": float(doc_alpha)}
    write_json_atomic(build_dir / MANIFEST, m.to_dict())
    return m
