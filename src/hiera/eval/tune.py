"""Tune DHR the way the paper did: grid search for top-20 (or any top-k) on training questions.

The tunable parameters and their grids are declared in :mod:`hiera.spec`:
``lam`` over its grid (0 … 2 by 0.1), then in steps of 0.01 within ±0.05 of
the best; ``top_docs`` over its grid (or the values given); for the
``hybrid-max`` document stage, ``doc_alpha`` first, for document top-1. Each
question's candidates (the documents of the largest ``top_docs`` and all their
passages' scores) are computed once; every (λ, top_docs) pair then only
re-ranks numbers, and answer matching is memoized per (question, passage), so
the grid costs little more than one evaluation.

Results are saved beside the build (:func:`hiera.index.manifest.write_tuned`),
never into its manifest.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

from hiera.corpus.store import CorpusStore
from hiera.errors import BadInputError, HieraError
from hiera.eval.match import has_answer
from hiera.eval.questions import Question
from hiera.fusion import dhr_score, mix, passage_score
from hiera.index.manifest import write_tuned
from hiera.index.passage_stage import StageResult
from hiera.index.publish import live_build_dir
from hiera.index.select import topk
from hiera.lock import writer_lock
from hiera.retrieve.dhr import DhrRetriever
from hiera.score.docstage import HYBRID_DEPTH, stage
from hiera.spec import DOC_ALPHA, LAM, PASSAGE_ALPHA, TOP_DOCS


@dataclass
class TuneResult:
    params: dict[str, Any]  # the chosen values, by their registry names (lam, top_docs, doc_alpha)
    target: float  # top-``target_k`` accuracy at the best (λ, top_docs): what the grid maximized
    top1: float  # the tie-breaker
    grid: list[dict[str, float]]
    target_k: int = 20


def fine_grid(best: float) -> list[float]:
    lo, hi = min(LAM.grid), max(LAM.grid)
    return [v for v in (round(best + 0.01 * i, 2) for i in range(-5, 6)) if lo <= v <= hi]


def tune_dhr(
    col: Any,
    questions: Sequence[Question],
    top_docs: Sequence[int] = TOP_DOCS.grid,
    doc_stage: str | None = None,
    target_k: int = 20,
    doc_alpha: float | None = None,
    passage_alphas: Sequence[float] | None = None,
    progress: bool = True,
    log: Callable[[str], None] = lambda m: None,
) -> TuneResult:
    """Grid search of (passage_alpha ×) top_docs × lam for top-``target_k`` accuracy, top-1 breaking ties.

    ``passage_alphas`` (the hybrid passage stage's BM25 weight) defaults to
    0 alone, the paper's dense passage stage; pass its registry grid to fit it.
    """
    if not questions:
        raise BadInputError("no questions to tune on")
    if any(not q.answers for q in questions):
        raise BadInputError("tuning needs questions with answers")
    td_grid = sorted({TOP_DOCS.parse(k) for k in top_docs})
    if not td_grid:
        raise BadInputError("no top_docs values to try")
    fixed = {"doc_stage": doc_stage} if doc_stage else {}
    if doc_alpha is not None:
        fixed["doc_alpha"] = doc_alpha
    pa_grid = sorted({PASSAGE_ALPHA.parse(a) for a in (passage_alphas if passage_alphas is not None else [0.0])})
    fixed["passage_alpha"] = pa_grid[0]  # the grid decides; the build's value must not leak into candidates
    r = DhrRetriever(col, **fixed)
    params = dict(r.defaults)
    texts = [q.text for q in questions]
    cands: list[StageResult] = []
    for i in tqdm(range(0, len(texts), 64), desc="candidates", disable=not progress, leave=False):
        batch = r._prepare(texts[i : i + 64], params)
        batch.filter = col.live  # a build with tombstones: candidates come from its live rows, as a search's do
        cands.extend(r.candidates(batch, max(td_grid), with_bm25=max(pa_grid) > 0))
    memo: dict[tuple[int, int], bool] = {}

    def answer_at(qi: int, pos: int) -> bool:
        key = (qi, pos)
        if key not in memo:
            p = col.passages_at([pos])[0]
            memo[key] = has_answer(questions[qi].answers, p.text, questions[qi].answer_mode)
        return memo[key]

    def score(lam: float, td: int, pa: float) -> tuple[float, float]:
        hit_k = hit_1 = 0
        for qi, c in enumerate(cands):
            keep, final = refuse(c, lam, td, pa)
            sel, _ = topk(final, target_k)
            pos = c.positions[keep][sel]
            flags = [answer_at(qi, int(p)) for p in pos]
            hit_k += any(flags)
            hit_1 += bool(flags[:1] and flags[0])
        n = len(cands)
        return hit_k / n, hit_1 / n

    grid: list[dict[str, float]] = []
    best: tuple[float, float, float, int, float] = (-1.0, -1.0, 0.0, 0, 0.0)
    for pa in pa_grid:
        for td in td_grid:
            coarse = {lam: score(lam, td, pa) for lam in LAM.grid}
            lam0 = max(coarse, key=lambda v: (coarse[v][0], coarse[v][1], -v))
            scores = {**coarse, **{lam: score(lam, td, pa) for lam in fine_grid(lam0) if lam not in coarse}}
            for lam, (tk, t1) in sorted(scores.items()):
                grid.append({"lam": lam, "top_docs": td, "passage_alpha": pa, f"top{target_k}": tk, "top1": t1})
                if (tk, t1) > (best[0], best[1]):
                    best = (tk, t1, lam, td, pa)
            lam_td = max(scores, key=lambda v: (scores[v], -v))
            also = f" top1={scores[lam_td][1]:.4f}" if target_k != 1 else ""  # top1 is the target itself at k 1
            log(f"passage_alpha={pa} top_docs={td}: best lam={lam_td} top{target_k}={scores[lam_td][0]:.4f}{also}")
    # passage_alpha always goes with the lam it was tuned with (0 when not searched)
    chosen: dict[str, Any] = {"lam": best[2], "top_docs": best[3], "passage_alpha": best[4]}
    return TuneResult(params=chosen, target=best[0], top1=best[1], grid=grid, target_k=target_k)


def refuse(c: StageResult, lam: float, top_docs: int, passage_alpha: float) -> tuple[np.ndarray, np.ndarray]:
    """(kept candidates, DHR scores) of one question's unfused candidates for another (λ, top_docs, α): the passages
    of its first ``top_docs`` documents, fused as the passage stage fuses them (:func:`hiera.fusion.passage_score`)."""
    keep = np.flatnonzero(c.doc_index < top_docs)
    dense = (c.dense if c.dense is not None else c.passage)[keep]
    bm25 = c.bm25[keep] if c.bm25 is not None else None
    return keep, dhr_score(passage_score(dense, bm25, passage_alpha), c.doc_score[keep], lam)


def tune_doc_alpha(
    col: Any, questions: Sequence[Question], alphas: Sequence[float] | None = None, progress: bool = True
) -> tuple[float, dict[float, float]]:
    """α of the ``hybrid-max`` document stage that maximizes document top-1 (gold documents needed).

    Both components are computed once per question; each α only re-weights them.
    Ties go to the α nearest 0.5 (neither signal alone).
    """
    qs = [q for q in questions if q.gold_docs]
    if not qs:
        raise BadInputError("tuning the document stage needs questions with gold documents")
    alphas = [DOC_ALPHA.parse(a) for a in (alphas if alphas is not None else DOC_ALPHA.grid)]
    r = DhrRetriever(col, doc_stage="hybrid-max")
    doc_ids = [d.id if d is not None else "" for d in col.docs_by_position()]
    hits = dict.fromkeys(alphas, 0)
    hybrid = stage("hybrid-max")
    for i in tqdm(range(0, len(qs), 64), desc="doc alpha", disable=not progress, leave=False):
        batch = r._prepare([q.text for q in qs[i : i + 64]], r.defaults)
        batch.filter = col.live
        for query, q in zip(batch, qs[i : i + 64], strict=True):
            docs, b, d = hybrid.components(col, query, HYBRID_DEPTH, 1)  # type: ignore[attr-defined]
            if len(docs) == 0:
                continue
            for a in alphas:
                hits[a] += doc_ids[int(docs[int(np.argmax(mix(b, d, a)))])] in q.gold_docs
    scores = {a: hits[a] / len(qs) for a in alphas}
    best = max(alphas, key=lambda a: (scores[a], -abs(a - 0.5)))
    return best, scores


def save_tuned(
    root: Any, params: dict[str, Any], meta: dict[str, Any], method: str = "dhr", build_dir: Path | None = None
) -> Path:
    """Record tuned values beside the live build (the manifest stays as built); they become its defaults.

    Holds the collection's writer lock. ``build_dir``: the build the values
    were fitted on; if another build has been swapped in since, nothing is
    saved (the values belong to the old one).
    """
    CorpusStore(Path(root))  # not a collection: refused before a lock file is created
    with writer_lock(Path(root), "hiera tune"):
        live = live_build_dir(Path(root))
        if live is None:
            raise BadInputError(f"{root} has no index to tune")
        if build_dir is not None and Path(build_dir).resolve() != live:
            raise HieraError(
                f"{root} was rebuilt while tuning ({Path(build_dir).name} → {live.name}); the values were not "
                "saved: rerun `hiera tune`"
            )
        return write_tuned(live, method, params, meta)
