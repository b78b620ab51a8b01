"""Run retrievers over a question set and compute the standard metrics.

Quality metrics come from ``batch_search`` (queries encoded in batches, which
is how a benchmark should spend its CPU). Latency is measured separately, as
single-query ``search`` calls on the first ``latency_sample`` questions:
that is what a user of ``hiera search`` or the API waits for.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tqdm import tqdm

from hiera.eval.match import hit_list
from hiera.eval.metrics import distinct, doc_topk, latency_percentiles, ranking_metrics, topk_accuracy
from hiera.eval.questions import Question
from hiera.results import Results
from hiera.retrieve import get_retriever


@dataclass
class RetrieverRun:
    """Everything measured for one retriever: metrics, runs and first-hit ranks."""

    name: str
    params: dict[str, Any] = field(default_factory=dict)  # the retriever's effective parameters
    metrics: dict[str, float] = field(default_factory=dict)
    passage_runs: list[Results] = field(default_factory=list)
    doc_runs: list[Results] = field(default_factory=list)
    first_hit: list[int | None] = field(default_factory=list)  # 0-based rank of first answer passage
    stage_ms: dict[str, float] = field(default_factory=dict)


def _batches(seq: Sequence[Any], n: int) -> list[Sequence[Any]]:
    return [seq[i : i + n] for i in range(0, len(seq), n)]


def _canonical_ids(col: Any) -> Callable[[str], str]:
    """Gold document id → the id it is stored under: a source document merged into another (``--duplicates
    merge``) is found as that one, so its questions still count; the identity when nothing was merged."""
    store = col.store
    if not store.stats().get("merged"):
        return lambda doc_id: doc_id
    return lambda doc_id: store.canonical_id(doc_id) or doc_id


def questions_without_gold(col: Any, questions: Sequence[Question]) -> int:
    """How many questions name gold documents of which none is in the collection: every retriever misses them,
    so a figure over them says more about the questions file than about the retriever."""
    store = col.store
    known: dict[str, bool] = {}

    def held(doc_id: str) -> bool:
        if doc_id not in known:
            known[doc_id] = store.canonical_id(doc_id) is not None
        return known[doc_id]

    return sum(1 for q in questions if q.gold_docs and not any(held(g) for g in q.gold_docs))


def questions_without_relevant(questions: Sequence[Question]) -> int:
    """How many questions are judged but have no relevant document (every judgement 0): the ranking metrics and
    ``doc_top{k}`` leave them out of their means (a query nothing answers measures no retriever), so they are
    counted here instead of vanishing."""
    return sum(1 for q in questions if q.qrels and not q.gold_docs)


def _canonical_qrels(qrels: dict[str, int], canonical: Callable[[str], str]) -> dict[str, int]:
    out: dict[str, int] = {}
    for doc_id, rel in qrels.items():
        c = canonical(doc_id)
        out[c] = max(out.get(c, rel), rel)
    return out


def evaluate_retriever(
    col: Any,
    name: str,
    questions: Sequence[Question],
    ks: Sequence[int] = (1, 5, 20, 100),
    params: dict[str, Any] | None = None,
    batch_size: int = 64,
    latency_sample: int = 200,
    progress: bool = True,
    retriever: Any = None,
    filter: str | None = None,
) -> RetrieverRun:
    """Metrics of one retriever on ``questions`` (see module docstring).

    ``filter``: every search runs inside it (:mod:`hiera.index.filters`); the
    metrics then also count the questions whose gold passage (or, without
    one, gold document) the filter excludes (``filter_gold_outside``), and are
    given again over the other questions alone (``…_gold_inside``).
    """
    r = retriever or get_retriever(name, col, **(params or {}))
    fkw = {"filter": filter} if filter else {}
    kmax = max(ks)
    run = RetrieverRun(name=name, params=dict(getattr(r, "defaults", {})))
    texts = [q.text for q in questions]
    has_answers = any(q.answers for q in questions)
    has_docs = any(q.gold_docs for q in questions)
    has_qrels = any(q.qrels for q in questions)
    kdoc = max(kmax, RANKING_DEPTH if has_qrels else ALL_GOLD_DEPTH)  # the depth @10/@100 name
    bar = tqdm(total=len(texts), desc=f"eval {name}", unit="q", disable=not progress, leave=False)
    for chunk in _batches(texts, batch_size):
        if "passage" in r.levels and has_answers:
            run.passage_runs.extend(r.batch_search(chunk, k=kmax, level="passage", **fkw))
        if "doc" in r.levels and (has_docs or has_qrels):
            run.doc_runs.extend(r.batch_search(chunk, k=kdoc, level="doc", **fkw))
        bar.update(len(chunk))
    bar.close()

    hits: list[list[bool]] = []
    if run.passage_runs:
        hits = [hit_list(res.hits, q.answers, q.answer_mode) for res, q in zip(run.passage_runs, questions, strict=True)]
        run.first_hit = [next((i for i, h in enumerate(hl) if h), None) for hl in hits]
    m = _quality(col, run.passage_runs, run.doc_runs, questions, ks, has_docs, has_qrels, hits)
    if filter:
        inside = gold_inside(col, questions, filter)
        m["filter_gold_outside"] = sum(1 for x in inside if x is False)
        m["filter_gold_unknown"] = sum(1 for x in inside if x is None)
        keep = [i for i, x in enumerate(inside) if x is not False]
        if len(keep) < len(questions) and keep:
            sub = _quality(col, [run.passage_runs[i] for i in keep] if run.passage_runs else [],
                           [run.doc_runs[i] for i in keep] if run.doc_runs else [], [questions[i] for i in keep], ks,
                           has_docs, has_qrels, [hits[i] for i in keep] if hits else [])
            m.update({f"{k}_gold_inside": v for k, v in sub.items()})

    # Per-stage time from the traces (batched), and single-query latency.
    traces = run.passage_runs or run.doc_runs
    if traces:
        sums: dict[str, float] = {}
        for res in traces:
            for step in res.trace:
                sums[step.name] = sums.get(step.name, 0.0) + step.ms
        run.stage_ms = {k: v / len(traces) for k, v in sums.items()}
    level = "passage" if "passage" in r.levels and has_answers else "doc"
    lat = []
    for q in texts[:latency_sample]:
        t = time.perf_counter()
        r.search(q, k=kmax, level=level, **fkw)
        lat.append((time.perf_counter() - t) * 1000)
    if lat:
        m.update(latency_percentiles(lat))
    run.metrics = m
    return run


def gold_inside(col: Any, questions: Sequence[Question], filter: str) -> list[bool | None]:
    """Per question, whether the filter allows its gold: any gold passage, else any gold document; ``None`` for a
    question with neither (answer strings only)."""
    from hiera.index.filters import compile_filter

    allowed = compile_filter(col, filter)
    canonical = _canonical_ids(col)
    passages: set[str] | None = None
    docs: set[str] | None = None
    out: list[bool | None] = []
    for q in questions:
        if q.gold_passages:
            if passages is None:
                passages = {p.id for p in col.passages_at(allowed.passage_positions)}
            out.append(bool(q.gold_passages & passages))
        elif q.gold_docs:
            if docs is None:
                docs = {d.id for d in col.docs_at(allowed.doc_positions)}
            out.append(any(canonical(g) in docs for g in q.gold_docs))
        else:
            out.append(None)
    return out


def _quality(col: Any, passage_runs: list, doc_runs: list, questions: Sequence[Question], ks: Sequence[int],
             has_docs: bool, has_qrels: bool, hits: list[list[bool]]) -> dict[str, float]:
    """The ranking metrics of the runs of ``questions``; ``hits``: which passages of each passage run hold an
    answer (:func:`hit_list`, matched once per run)."""
    m: dict[str, float] = {}
    if passage_runs:
        m.update(topk_accuracy(hits, ks))
        gold_p = [q.gold_passages for q in questions]
        if any(gold_p):
            ranked = [[h.passage_id or "" for h in res.hits] for res in passage_runs]
            m.update({f"gold_passage_top{k}": v for k, v in _gold_topk(ranked, gold_p, ks).items()})
    canonical = _canonical_ids(col)
    if doc_runs and has_docs:
        ranked_docs = [[h.doc_id for h in res.hits] for res in doc_runs]
        gold = [{canonical(g) for g in q.gold_docs} for q in questions]
        if any(gold):
            m.update(doc_topk(ranked_docs, gold, ks))
        multi = [i for i, g in enumerate(gold) if len(g) > 1]
        if multi:
            m["doc_all_top10"] = sum(gold[i] <= set(distinct(ranked_docs[i])[:ALL_GOLD_DEPTH]) for i in multi) / len(multi)
    if doc_runs and has_qrels:
        run_dict = {q.id: {h.doc_id: h.score for h in res.hits} for res, q in zip(doc_runs, questions, strict=True)}
        qrels = {q.id: _canonical_qrels(q.qrels, canonical) for q in questions if q.qrels}
        if qrels:
            m.update(ranking_metrics(run_dict, qrels, ks))
    return m


def _gold_topk(ranked: list[list[str]], gold: list[set[str]], ks: Sequence[int]) -> dict[str, float]:
    with_gold = [(r, g) for r, g in zip(ranked, gold, strict=True) if g]
    out = {}
    for k in ks:
        out[k] = sum(1 for r, g in with_gold if g & set(r[:k])) / len(with_gold)
    return out


def evaluate(
    col: Any,
    questions: Sequence[Question],
    retrievers: Sequence[str],
    ks: Sequence[int] = (1, 5, 20, 100),
    params: dict[str, dict[str, Any]] | None = None,
    progress: bool = True,
    log: Callable[[str], None] = lambda m: None,
    **kw: Any,
) -> dict[str, RetrieverRun]:
    out = {}
    for name in retrievers:
        t = time.perf_counter()
        out[name] = evaluate_retriever(col, name, questions, ks, (params or {}).get(name), progress=progress, **kw)
        log(f"{name}: {len(questions)} questions in {time.perf_counter() - t:.1f}s")
    return out


# -- reports --------------------------------------------------------------
RANKING_DEPTH = 100  # the deepest cut the judged-ranking metrics name (map@100): documents retrieved for them
ALL_GOLD_DEPTH = 10  # doc_all_top10's cut
COUNTS = {"filter_gold_outside", "filter_gold_unknown"}  # metrics that count questions (not rates)


def markdown_table(runs: dict[str, RetrieverRun]) -> str:
    keys: list[str] = []
    for r in runs.values():
        keys += [k for k in r.metrics if k not in keys]
    lines = ["| retriever | " + " | ".join(keys) + " |", "|---|" + "---|" * len(keys)]
    for name, r in runs.items():
        cells = []
        for k in keys:
            v = r.metrics.get(k)
            cells.append("–" if v is None else f"{v:.1f}" if k.startswith("latency") else
                         f"{int(v)}" if k in COUNTS else f"{100 * v:.1f}")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    lines.append("")
    lines.append("Rates and ranking metrics (recall, mrr, ndcg, map, accuracies) in %; latencies in ms"
                 + ("; filter_gold_* count questions." if set(keys) & COUNTS else "."))
    return "\n".join(lines)


def write_trec(runs: dict[str, RetrieverRun], questions: Sequence[Question], out: Path) -> list[Path]:
    """One TREC run file per retriever (documents when judgements are documents, else passages)."""
    paths = []
    for name, r in runs.items():
        results = r.doc_runs if (r.doc_runs and any(q.qrels or q.gold_docs for q in questions)) else r.passage_runs
        path = out / f"{name}.trec"
        with open(path, "w", encoding="utf-8") as fh:
            for q, res in zip(questions, results, strict=True):
                for h, score in zip(res.hits, _strictly_falling([h.score for h in res.hits]), strict=True):
                    docno = h.doc_id if res.level == "doc" else (h.passage_id or h.doc_id)
                    fh.write(f"{_trec_token(q.id)} Q0 {_trec_token(docno)} {h.rank} {score:.6f} hiera-{name}\n")
        paths.append(path)
    return paths


def _strictly_falling(scores: Sequence[float], step: float = 1e-6) -> list[float]:
    """Scores as written to a run file, strictly falling at its printed precision (``step``).

    trec_eval, pytrec_eval and ir_measures re-sort tied scores by document id, so a run file with ties (RRF
    makes many) would evaluate to other figures than hiera reports for the same ranking. A tie is lowered by
    one ``step`` below the score written before it: the file keeps the rank order, and every score stays within
    ``step`` times its rank of the retriever's."""
    out: list[float] = []
    for s in scores:
        v = round(float(s), 6)
        if out and v >= out[-1]:
            v = round(out[-1] - step, 6)
        out.append(v)
    return out


def _trec_token(text: str) -> str:
    """A TREC run column is one whitespace-free token: whitespace in an id becomes ``_`` (as in the docno)."""
    return "_".join(str(text).split()) or "_"


def plot_topk(runs: dict[str, RetrieverRun], out: Path, kmax: int = 100) -> Path | None:
    """Top-k answer accuracy curves, k = 1 … kmax (matplotlib, no display)."""
    curves = {n: r.first_hit for n, r in runs.items() if r.first_hit}
    if not curves:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    ks = list(range(1, kmax + 1))
    for name, first in curves.items():
        n = len(first)
        acc = [100 * sum(1 for f in first if f is not None and f < k) / n for k in ks]
        ax.plot(ks, acc, label=name)
    ax.set_xscale("log")
    ax.set_xlabel("k (passages)")
    ax.set_ylabel("top-k answer accuracy (%)")
    ax.grid(True, alpha=0.3)
    ax.legend()
    fig.tight_layout()
    path = out / "topk.png"
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
