"""Any retriever on QUEST-format set queries: ``hiera eval COLL --format quest``.

Gold sets are entity titles; a collection's documents have ids (the ``ovos``
reader's are slugs of titles), so each gold title is mapped to a document id
through the store (:func:`hiera.sets.queries.gold_ids`: titles and redirect aliases, exact
match). A title the collection lacks stays in the gold set as ``title:…`` —
it can never be retrieved and counts against recall, as a missing document
would in QUEST's own scripts; ``gold_titles_missing`` counts them.

The predicted **set** of a query is the retriever's ``answer_set`` when it
gives one (``sets``), else its first ``set_k`` documents (the paper's top-K
baselines); Recall@K and MRecall@K read the ranked hits (``max(ks)`` of them).
Metrics: :func:`hiera.eval.quest.quest_scores`, overall and per template.
Predictions can be written in QUEST's format (titles), one file for the sets
(what ``run_eval.py`` reads) and one for the rankings (``analyze_retriever.py``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from tqdm import tqdm

from hiera.errors import BadInputError
from hiera.eval.metrics import QUEST_KS, distinct
from hiera.eval.quest import quest_scores
from hiera.sets.queries import Prediction, SetQuery, gold_ids, write_predictions
from hiera.spec import MAX_K


@dataclass
class SetRun:
    """One retriever on a set-query file: metrics, predicted sets and rankings (as QUEST predictions)."""

    name: str
    params: dict[str, Any] = field(default_factory=dict)
    metrics: dict[str, Any] = field(default_factory=dict)
    sets: list[Prediction] = field(default_factory=list)
    rankings: list[Prediction] = field(default_factory=list)

    def write(self, out: Path) -> list[Path]:
        """``<name>.sets.jsonl`` and ``<name>.ranking.jsonl`` in QUEST's prediction format (a repeated query once)."""
        paths = []
        for kind, preds in (("sets", self.sets), ("ranking", self.rankings)):
            seen: set[str] = set()
            uniq = [p for p in preds if not (p.query in seen or seen.add(p.query))]  # type: ignore[func-returns-value]
            path = out / f"{self.name}.{kind}.jsonl"
            write_predictions(path, uniq)
            paths.append(path)
        return paths


def evaluate_sets(
    col: Any,
    name: str,
    queries: Sequence[SetQuery],
    retriever: Any,
    set_k: int = 10,
    ks: Sequence[int] = QUEST_KS,
    batch_size: int = 32,
    progress: bool = True,
) -> SetRun:
    """QUEST's metrics of ``retriever`` on ``queries`` (see the module docstring)."""
    if not queries:
        raise BadInputError("no set queries to evaluate")
    if set_k <= 0 or set_k > MAX_K:
        raise BadInputError(f"--set-k must be in 1..{MAX_K}, got {set_k}")
    if "doc" not in retriever.levels:
        raise BadInputError(f"retriever {name!r} does not rank documents; set queries are scored on documents")
    k = min(MAX_K, max(max(ks), set_k))
    gold: list[SetQuery] = []
    missing = 0
    for q in queries:
        ids, miss = gold_ids(col.store, q)
        missing += miss
        gold.append(replace(q, docs=tuple(sorted(ids))))
    ranked: dict[str, list[str]] = {}
    chosen: dict[str, list[str]] = {}
    run = SetRun(name=name, params=dict(getattr(retriever, "defaults", {})))
    texts = [q.query for q in queries]
    has_sets = False
    bar = tqdm(total=len(texts), desc=f"eval {name}", unit="q", disable=not progress, leave=False)
    for start in range(0, len(texts), batch_size):
        chunk = list(queries[start : start + batch_size])
        results = retriever.batch_search([q.query for q in chunk], k=k, level="doc")
        for q, res in zip(chunk, results, strict=True):
            docs = distinct(h.doc_id for h in res.hits)
            titles = {h.doc_id: h.title for h in res.hits}
            scores = {h.doc_id: h.score for h in res.hits}
            if res.answer_set is not None:
                has_sets = True
                members = list(res.answer_set)
            else:
                members = docs[:set_k]
            ranked[q.query] = docs
            chosen[q.query] = members
            run.rankings.append(Prediction.for_query(q, [(titles[d], scores[d]) for d in docs]))
            run.sets.append(Prediction.for_query(q, [(titles.get(d, d), scores.get(d, 0.0)) for d in members]))
        bar.update(len(chunk))
    bar.close()
    m = quest_scores(gold, ranked, ks, sets=chosen)
    m["gold_titles_missing"] = missing
    m["predicted_set"] = "answer_set" if has_sets else f"top-{set_k}"
    m["avg_set_size"] = sum(len(v) for v in chosen.values()) / len(chosen)
    run.metrics = m
    return run


KEYS = ("set_precision", "set_recall", "set_f1")


def markdown_table(runs: dict[str, SetRun], ks: Sequence[int] = QUEST_KS) -> str:
    """Avg P/R/F1 of the predicted sets, Recall@K and MRecall@K, overall then per template (in %)."""
    cols = [*KEYS, *(f"recall@{k}" for k in ks), *(f"mrecall@{k}" for k in ks)]
    heads = ["P", "R", "F1", *(f"R@{k}" for k in ks), *(f"MR@{k}" for k in ks)]
    lines = ["| retriever | template | n | " + " | ".join(heads) + " |", "|---|---|---|" + "---|" * len(cols)]
    for name, run in runs.items():
        blocks = [("all", run.metrics), *run.metrics.get("by_template", {}).items()]
        for tpl, b in blocks:
            cells = [f"{100 * b[c]:.1f}" if c in b else "–" for c in cols]
            lines.append(f"| {name} | {tpl} | {b.get('count', '')} | " + " | ".join(cells) + " |")
    lines.append("")
    lines.append("Avg precision, recall and F1 of the predicted sets, Recall@K and MRecall@K, in %.")
    return "\n".join(lines)


__all__ = ["SetRun", "evaluate_sets", "markdown_table"]
