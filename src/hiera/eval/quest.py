"""QUEST's official metrics over QUEST-format files, overall and per template.

The definitions live in :mod:`hiera.eval.metrics` (``set_metrics``,
``recall_at_k``, ``mrecall_at_k``, checked against QUEST's ``run_eval.py`` and
``analyze_retriever.py``); this module only joins gold queries with
predictions the way those scripts do (by query text) and adds the
per-template breakdown ``analyze_retriever.py`` prints for Recall@K and
MRecall@K.

Keys, as ``hiera eval --format quest --json`` reports them: ``set_precision``,
``set_recall``, ``set_f1`` (means over gold queries of the per-query
precision, recall and F1 of the predicted set; 0 for a query with no correct
document), ``recall@K`` (mean share of the gold set within the first K
predicted documents), ``mrecall@K`` (share of queries whose whole gold set is
within the first K), ``count``, and ``by_template`` (template -> the same
keys). A gold query without a prediction counts as an empty prediction (the
official scripts stop with a ``KeyError`` instead); ``missing`` counts them.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from hiera.errors import BadInputError
from hiera.eval.metrics import QUEST_KS, mrecall_at_k, recall_at_k, set_metrics
from hiera.sets.queries import SetQuery, load_set_queries, read_predictions

NO_TEMPLATE = "(none)"


def _block(
    ranked: Mapping[str, Sequence[str]],
    gold: Mapping[str, set[str]],
    ks: list[int],
    sets: Mapping[str, Sequence[str]] | None = None,
) -> dict[str, Any]:
    sm = set_metrics(ranked if sets is None else sets, gold)
    out: dict[str, Any] = {
        "set_precision": sm["avg_precision"],
        "set_recall": sm["avg_recall"],
        "set_f1": sm["avg_f1"],
    }
    out.update(recall_at_k(ranked, gold, ks))
    out.update(mrecall_at_k(ranked, gold, ks))
    out["count"] = len(gold)
    return out


def quest_scores(
    gold: Sequence[SetQuery],
    predictions: Mapping[str, Sequence[str]],
    ks: Iterable[int] = QUEST_KS,
    sets: Mapping[str, Sequence[str]] | None = None,
) -> dict[str, Any]:
    """QUEST's metrics for ``predictions`` (query text -> ranked titles) against ``gold``.

    The predicted set for avg P/R/F1 is the whole list; Recall@K and
    MRecall@K cut it at K before making it a set, as the official script does.
    With ``sets`` (query text -> predicted set) avg P/R/F1 are computed on
    those sets instead, and the lists only give Recall@K and MRecall@K (a set
    method's members, and its full ranking).
    """
    ks = list(ks)
    if not gold:
        raise BadInputError("no gold queries to evaluate")
    ids = [str(i) for i in range(len(gold))]
    gold_sets = {i: set(q.docs) for i, q in zip(ids, gold, strict=True)}
    ranked = {i: list(predictions[q.query]) for i, q in zip(ids, gold, strict=True) if q.query in predictions}
    chosen = None if sets is None else {i: list(sets[q.query]) for i, q in zip(ids, gold, strict=True) if q.query in sets}
    out = _block(ranked, gold_sets, ks, chosen)
    out["missing"] = len(gold) - len(ranked)
    groups: dict[str, list[str]] = defaultdict(list)
    for i, q in zip(ids, gold, strict=True):
        groups[q.template or NO_TEMPLATE].append(i)
    out["by_template"] = {
        t: _block(
            {i: ranked[i] for i in g if i in ranked},
            {i: gold_sets[i] for i in g},
            ks,
            None if chosen is None else {i: chosen[i] for i in g if i in chosen},
        )
        for t, g in sorted(groups.items())
    }
    return out


def score_files(gold_path: str | Path, pred_path: str | Path, ks: Iterable[int] = QUEST_KS) -> dict[str, Any]:
    """:func:`quest_scores` of a QUEST prediction file against a QUEST gold file."""
    gold = load_set_queries(gold_path, require_docs=True)
    preds = read_predictions(pred_path)
    return quest_scores(gold, {q: list(p.docs) for q, p in preds.items()}, ks)


__all__ = ["NO_TEMPLATE", "quest_scores", "score_files"]
