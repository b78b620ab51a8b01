"""Threshold search for the ``sets`` method: ``hiera sets tune`` (the QUEST paper's search on validation).

QUEST keeps the documents its classifier scores above a threshold chosen on
the validation set to maximize avg F1 of the predicted sets. Here the
classifier scores *constraints* and the sets are combined by set algebra,
so the search runs end to end: for each candidate threshold, every
validation query's accepted sets are combined by its expression
(:meth:`hiera.retrieve.sets.SetPlan.members` then
:func:`hiera.sets.expr.evaluate`) and scored against its gold set. Scores are
computed once per query (the plans), so a threshold costs only set algebra.

* **global**: one threshold for every constraint (the paper's single
  threshold), from :data:`GRID`; among equally good thresholds the middle
  one of the best run is kept (the plateau's centre generalizes best);
* **per role** (decomposed queries): a subtracted constraint trades errors
  the other way (accepting a document wrongly removes a true member), and an
  intersection's qualifier (a side after the first) only confirms members of
  the set the first side names while every side must pass, so ``negative`` and ``conjunct`` constraints may want
  thresholds of their own. From the global threshold, each role's threshold
  is searched in turn with the others held (two rounds of coordinate
  ascent), for the roles that at least ``min_role_queries`` validation
  queries have; kept only when it beats the global threshold's avg F1 by
  ``min_gain`` (otherwise the global threshold serves every role);
* **query** role (plans made with ``decompose=false``): one threshold for the
  undecomposed baseline, stored beside the others;
* **lexical weight** (:func:`tune_blend`): the classifier's probability may be
  blended with the document's lead coverage of the constraint
  (:mod:`hiera.sets.lexical`), ``(1 − w)·p + w·lead``; each ``w`` of :data:`LEXICAL_GRID` gets its own
  threshold search and a ``w`` above 0 is kept only when it beats the pure
  classifier by ``min_gain`` (a classifier trained in a short CPU budget is
  still unsure of exact attributes that the words state).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from hiera.errors import BadInputError
from hiera.sets.classifier import Thresholds, read_thresholds
from hiera.sets.expr import evaluate
from hiera.sets.lexical import LEXICAL_EVIDENCE

EVIDENCE = {"lexical_evidence": LEXICAL_EVIDENCE}

GRID: tuple[float, ...] = tuple(round(0.02 * i, 2) for i in range(1, 50))  # 0.02 … 0.98
ROLE_ORDER = ("positive", "conjunct", "negative")


def set_f1(pred: set[str], gold: set[str]) -> float:
    """QUEST's per-query F1 (0 with no correct document)."""
    tp = len(pred & gold)
    if not tp:
        return 0.0
    p, r = tp / len(pred), tp / len(gold)
    return 2 * p * r / (p + r)


def predicted(plan: Any, thresholds: dict[str, float]) -> set[str]:
    return set(evaluate(plan.expr, plan.members(thresholds), plan.scores))


def avg_f1(plans: Sequence[Any], golds: Sequence[set[str]], thresholds: dict[str, float]) -> float:
    return sum(set_f1(predicted(p, thresholds), g) for p, g in zip(plans, golds, strict=True)) / len(plans)


def _plateau_centre(values: Sequence[float], scores: Sequence[float]) -> tuple[float, float]:
    best = max(scores)
    tied = [v for v, s in zip(values, scores, strict=True) if s >= best - 1e-9]
    return tied[len(tied) // 2], best


def tune_thresholds(
    plans: Sequence[Any],
    golds: Sequence[set[str]],
    grid: Sequence[float] = GRID,
    min_role_queries: int = 5,
    min_gain: float = 0.005,
    rounds: int = 2,
) -> dict[str, Any]:
    """The thresholds maximizing avg F1 of ``plans`` against ``golds`` (see the module docstring)."""
    if not plans or len(plans) != len(golds):
        raise BadInputError("threshold tuning needs validation queries with gold sets")
    grid = sorted(set(float(g) for g in grid))
    if not grid or grid[0] < 0 or grid[-1] > 1:
        raise BadInputError("thresholds must lie in [0, 1]")
    roles = {r for p in plans for r in p.roles.values()}
    if roles == {"query"}:
        f1s = [avg_f1(plans, golds, {"query": t}) for t in grid]
        t, f1 = _plateau_centre(grid, f1s)
        return {"mode": "query", "by_role": {"query": t}, "f1": f1, "queries": len(plans), "curve": dict(zip(grid, f1s, strict=True))}
    if "query" in roles:
        raise BadInputError("plans mix decomposed and undecomposed queries; tune them separately")
    f1s = [avg_f1(plans, golds, dict.fromkeys(ROLE_ORDER, t)) for t in grid]
    t, f1 = _plateau_centre(grid, f1s)
    counts = {r: sum(1 for p in plans if r in p.roles.values()) for r in ROLE_ORDER}
    out: dict[str, Any] = {
        "mode": "global", "threshold": t, "by_role": {}, "f1": f1, "f1_global": f1, "queries": len(plans),
        "queries_per_role": counts, "curve": dict(zip(grid, f1s, strict=True)),
    }
    searched = [r for r in ROLE_ORDER if counts[r] >= min_role_queries]
    if len(searched) < 1 or (searched == ["positive"] and set(roles) == {"positive"}):
        return out
    # coordinate ascent from the global threshold: each role's threshold in turn, the others held
    current = dict.fromkeys(ROLE_ORDER, t)
    best = f1
    for _ in range(rounds):
        for r in searched:
            scores = [avg_f1(plans, golds, {**current, r: v}) for v in grid]
            v, score = _plateau_centre(grid, scores)
            if score > best + 1e-9:
                current[r], best = v, score
    if best >= f1 + min_gain:
        out.update(mode="per-role", by_role={r: current[r] for r in searched}, f1=best)
    return out


LEXICAL_GRID: tuple[float, ...] = (0.0, 0.25, 0.5, 0.75)


def tune_blend(
    plans: Sequence[Any], golds: Sequence[set[str]], weights: Sequence[float] = LEXICAL_GRID, **kw: Any
) -> dict[str, Any]:
    """:func:`tune_thresholds` for each lexical weight (plans re-blended, :meth:`SetPlan.blend`); the best wins.

    A weight above 0 must beat weight 0 by ``min_gain`` (default 0.005) to be kept: the classifier's own
    probabilities are the default.
    """
    min_gain = kw.pop("min_gain_blend", 0.005)
    results = []
    for w in weights:
        res = tune_thresholds([p.blend(w) for p in plans], golds, **kw)
        res["lexical_weight"] = float(w)
        results.append(res)
    best = results[0]
    for res in results[1:]:
        if res["f1"] > best["f1"] + (min_gain if best["lexical_weight"] == 0 else 1e-9):
            best = res
    best["by_weight"] = {r["lexical_weight"]: r["f1"] for r in results}
    return best


def thresholds_from(result: dict[str, Any], model_dir: Any, meta: dict[str, Any] | None = None) -> Thresholds:
    """What to save beside the classifier: a query-role result keeps the saved global threshold."""
    old = read_thresholds(model_dir)
    if old is not None and not old.evidence_matches():
        old = None  # blended with another lexical evidence: none of its thresholds carries over
    meta = {**(meta or {}), "f1": result["f1"], "mode": result["mode"], "queries": result["queries"]}
    weights = dict(old.lexical_weight) if old is not None else {}
    mode = "query" if result["mode"] == "query" else "decomposed"
    weights[mode] = float(result.get("lexical_weight", 0.0))
    if mode == "query":
        glob = old.threshold if old is not None else result["by_role"]["query"]
        by_role = {**(old.by_role if old else {}), **result["by_role"]}
        return Thresholds(glob, by_role, "tuned", {**(old.meta if old else {}), "query": meta, **EVIDENCE}, weights)
    by_role = dict(result["by_role"])
    if old is not None and "query" in old.by_role:
        by_role["query"] = old.by_role["query"]
    kept = {k: v for k, v in (old.meta if old else {}).items() if k == "query"}
    return Thresholds(result["threshold"], by_role, "tuned", {**kept, "decomposed": meta, **EVIDENCE}, weights)


__all__ = ["GRID", "LEXICAL_GRID", "avg_f1", "predicted", "set_f1", "thresholds_from", "tune_blend", "tune_thresholds"]
