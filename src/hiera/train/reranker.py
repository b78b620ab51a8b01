"""Train a cross-encoder reranker from all-MiniLM-L6-v2 and calibrate its threshold.

QUEST's recipe: one output logit trained with binary cross-entropy on
(question, passage) pairs, positives against BM25 and random negatives in
equal numbers. The probability threshold is then chosen on held-out
questions to maximize F1 of "relevant", so the same model can act as the
relevance classifier of set queries; it is saved next to the weights in
``hiera-reranker.json`` and :class:`hiera.crossencoder.Reranker` reads it.

Passages are given to the model as the indexes give them to the passage
encoder: titled text (document title and section path, newline, text).
"""

from __future__ import annotations

import contextlib
import random
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

from hiera.builds import open_collection
from hiera.collection import Collection
from hiera.encode import resolve_model_path
from hiera.errors import BadInputError, HieraError
from hiera.eval.questions import Question
from hiera.io import write_json_atomic
from hiera.models import LOCAL_ONLY, check_weights, quiet_transformers
from hiera.train import negatives as neg
from hiera.train.args import RerankerArgs
from hiera.train.common import (
    check_out,
    holdout,
    pairs_digest,
    peak_rss_mb,
    publish,
    require_training_libs,
    resume_point,
    run_key,
    run_report,
    sample_questions,
    time_budget_callback,
    train_device,
    train_resumed,
    training_kwargs,
)
from hiera.train.examples import find_positive, judge_for
from hiera.train.pool import PassagePool

META_FILE = "hiera-reranker.json"


def mined_rankings(
    col: Collection, pool: PassagePool, questions: Sequence[Question], method: str, depth: int
) -> list[np.ndarray]:
    """Each question's top ``depth`` passage positions by a registry retriever (the negatives' source).

    BM25 negatives are lexically close but often easy for a cross-encoder; the
    passages a hybrid or DHR retriever ranks high without the answer are the
    ones the reranker will actually have to push down at search time.
    """
    from hiera.retrieve import get_retriever

    retriever = get_retriever(method, col)
    if "passage" not in retriever.levels:
        raise BadInputError(f"--negatives-from {method}: the method returns no passages")
    where = pool.passage_position
    out: list[np.ndarray] = []
    for res in retriever.batch_search([q.text for q in questions], k=depth, level="passage"):
        out.append(np.array([where[h.passage_id] for h in res.hits if h.passage_id in where], dtype=np.int64))
    return out


def reranker_pairs(
    col: Collection,
    pool: PassagePool,
    questions: Sequence[Question],
    negatives_per_positive: int,
    seed: int,
    depth: int = 100,
    progress: bool = False,
    negatives_from: str = "bm25",
) -> tuple[list[tuple[str, str]], list[float]]:
    """Labelled pairs: each question's positive, then hard (``negatives_from``'s top) and random negatives, half each."""
    rng = random.Random(seed)
    bm25 = col.bm25_passages
    n_hard = (negatives_per_positive + 1) // 2
    rankings = None if negatives_from == "bm25" else mined_rankings(col, pool, questions, negatives_from, depth)
    pairs: list[tuple[str, str]] = []
    labels: list[float] = []
    for i, q in enumerate(tqdm(questions, desc="reranker pairs", unit="q", disable=not progress, leave=False)):
        found = find_positive(pool, bm25, q, depth)
        if found is None:
            continue
        pos = found[0]
        judge = judge_for(pool, q)
        if rankings is None:
            hard = neg.bm25_passages(bm25, q.text, judge, pos, n_hard, depth)
        else:
            hard = neg.mined(rankings[i], judge.passage, pos, n_hard)
        seen = {pos, *hard}
        rand = neg.random_fill(
            len(pool.passage_ids), judge.passage, seen, negatives_per_positive - len(hard), rng
        )
        pairs.append((q.text, pool.passage_input[pos]))
        labels.append(1.0)
        for p in hard + rand:
            pairs.append((q.text, pool.passage_input[p]))
            labels.append(0.0)
    return pairs, labels


def calibrate_threshold(probs: np.ndarray, labels: np.ndarray) -> dict[str, float]:
    """The probability cut that maximizes F1 of the positive class, with its precision/recall."""
    probs = np.asarray(probs, dtype=np.float64)
    labels = np.asarray(labels) > 0.5
    if labels.sum() == 0 or labels.all():
        raise HieraError("calibration needs both relevant and irrelevant pairs")
    order = np.argsort(-probs, kind="stable")
    p_sorted, l_sorted = probs[order], labels[order]
    tp = np.cumsum(l_sorted)
    fp = np.cumsum(~l_sorted)
    precision = tp / (tp + fp)
    recall = tp / labels.sum()
    f1 = 2 * precision * recall / np.maximum(precision + recall, 1e-12)
    # Only cut between distinct scores: a threshold cannot split ties.
    last_of_run = np.r_[p_sorted[1:] != p_sorted[:-1], True]
    f1 = np.where(last_of_run, f1, -1.0)
    i = int(np.argmax(f1))
    nxt = p_sorted[i + 1] if i + 1 < len(p_sorted) else 0.0
    threshold = float((p_sorted[i] + nxt) / 2)
    # ROC AUC by ranks (Mann-Whitney U), ties counted half.
    ranks = np.empty(len(probs))
    ranks[np.argsort(probs, kind="stable")] = np.arange(1, len(probs) + 1)
    for v in np.unique(probs):
        same = probs == v
        if same.sum() > 1:
            ranks[same] = ranks[same].mean()
    n_pos, n_neg = labels.sum(), (~labels).sum()
    auc = (ranks[labels].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg)
    return {
        "threshold": threshold,
        "f1": float(f1[i]),
        "precision": float(precision[i]),
        "recall": float(recall[i]),
        "auc": float(auc),
        "accuracy_at_0.5": float(((probs >= 0.5) == labels).mean()),
        "pairs": int(len(probs)),
    }


def training_arguments(args: RerankerArgs, output_dir: Path) -> Any:
    """The ``CrossEncoderTrainingArguments`` of one cross-encoder run (shared fields: :func:`training_kwargs`)."""
    from sentence_transformers import CrossEncoderTrainingArguments

    return CrossEncoderTrainingArguments(**training_kwargs(args, output_dir))


def split_questions(
    questions: Sequence[Question], args: RerankerArgs, dev_questions: Sequence[Question] | None = None
) -> tuple[list[Question], list[Question]]:
    """(training, calibration) questions: the seeded sample, then a seeded ``dev_fraction`` hold-out (same every run)."""
    qs = sample_questions(questions, args.max_examples, args.seed)
    if dev_questions is not None:
        return qs, list(dev_questions)
    return holdout(qs, args.dev_fraction, args.seed)


WEIGHT_GRID = tuple(i / 10 for i in range(11))


def calibrate_weight(
    col: Collection, model_dir: str | Path, questions: Sequence[Question], method: str, depth: int = 20,
    log: Callable[[str], None] = print,
) -> dict[str, Any]:
    """The cross-encoder's weight in the reranked score that maximizes top-1 on held-out questions.

    Each question's top ``depth`` passages by ``method`` (the retriever the
    negatives came from) are scored once; every weight of :data:`WEIGHT_GRID`
    then reorders them with :meth:`hiera.crossencoder.Reranker.combine`. Ties go to
    the larger weight (more of the cross-encoder).
    """
    from hiera.crossencoder import Reranker, hit_input
    from hiera.eval.match import hit_list
    from hiera.retrieve import get_retriever

    reranker = Reranker(model_dir)
    sep = col.store.title_sep
    results = get_retriever(method, col).batch_search([q.text for q in questions], k=depth, level="passage")
    lists = []
    for q, r in zip(questions, results, strict=True):
        if not r.hits:
            continue
        if q.answers:
            rel = np.array(hit_list(r.hits, q.answers, q.answer_mode))
        else:
            rel = np.array([h.doc_id in q.gold_docs for h in r.hits])
        probs = reranker.score(q.text, [hit_input(h, sep) for h in r.hits])
        lists.append((rel, probs, np.array([h.score for h in r.hits])))
    if not lists:
        raise HieraError("weight calibration: the retriever found nothing for the calibration questions")
    top1 = {}
    for w in WEIGHT_GRID:
        reranker.weight = w
        top1[w] = float(np.mean([rel[int(np.argmax(reranker.combine(p, b)))] for rel, p, b in lists]))
    best = max(WEIGHT_GRID, key=lambda w: (top1[w], w))
    log(f"reranker weight {best:.1f}: top-1 {100 * top1[best]:.1f} on {len(lists)} held-out questions "
        f"({method} top {depth}; cross-encoder alone {100 * top1[1.0]:.1f}, {method} alone {100 * top1[0.0]:.1f})")
    return {"weight": best, "weight_fit": {"method": method, "depth": depth, "questions": len(lists),
                                           "top1": {f"{w:.1f}": round(v, 4) for w, v in top1.items()}}}


def recalibrate_reranker(
    index: str | Path, questions: Sequence[Question], out: str | Path, args: RerankerArgs,
    dev_questions: Sequence[Question] | None = None, log: Callable[[str], None] = print,
) -> dict[str, Any]:
    """``hiera train-reranker --calibrate-only``: fit the weight of an existing model directory, rewrite its metadata."""
    from hiera.io import loads_json

    args.check()
    out = Path(out)
    meta_path = out / META_FILE
    if not meta_path.is_file():
        raise BadInputError(f"--calibrate-only: {out} has no {META_FILE} (train it with hiera train-reranker first)")
    _, dev = split_questions(questions, args, dev_questions)
    fit = calibrate_weight(open_collection(index), out, dev, args.negatives_from, log=log)
    meta = {**loads_json(meta_path.read_text(encoding="utf-8")), **fit}
    write_json_atomic(meta_path, meta)
    return meta


def train_reranker(
    index: str | Path,
    questions: Sequence[Question],
    out: str | Path,
    args: RerankerArgs,
    dev_questions: Sequence[Question] | None = None,
    log: Callable[[str], None] = print,
) -> dict[str, Any]:
    """``hiera train-reranker``: pairs, BCE training, threshold calibration, publish ``out``."""
    args.check()
    check_out(out, META_FILE, "reranker")
    require_training_libs()
    t0 = time.perf_counter()
    col = open_collection(index)
    pool = PassagePool.from_collection(col)
    qs, dev_questions = split_questions(questions, args, dev_questions)
    train_pairs, train_labels = reranker_pairs(
        col, pool, qs, args.negatives_per_positive, args.seed, args.depth, args.progress, args.negatives_from
    )
    dev_pairs, dev_labels = reranker_pairs(
        col, pool, dev_questions, args.negatives_per_positive, args.seed + 1, args.depth, args.progress,
        args.negatives_from,
    )
    if len(train_pairs) < 2:
        raise HieraError("fewer than 2 training pairs; give more questions")
    log(f"reranker: {len(train_pairs)} training pairs from {len(qs)} questions, {len(dev_pairs)} dev pairs")
    return fit_cross_encoder(
        train_pairs,
        train_labels,
        dev_pairs,
        dev_labels,
        args,
        out,
        report={"collection": str(col.root), "train": {"questions": len(qs)}, "dev_questions": len(dev_questions)},
        t0=t0,
        log=log,
        before_publish=lambda tmp: calibrate_weight(col, tmp, dev_questions, args.negatives_from, log=log),
    )


def fit_cross_encoder(
    train_pairs: Sequence[tuple[str, str]],
    train_labels: Sequence[float],
    dev_pairs: Sequence[tuple[str, str]],
    dev_labels: Sequence[float],
    args: RerankerArgs,
    out: str | Path,
    report: dict[str, Any] | None = None,
    t0: float | None = None,
    log: Callable[[str], None] = print,
    name: str = "reranker",
    before_publish: Callable[[Path], dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """Train a one-logit cross-encoder with BCE on labelled pairs, calibrate its threshold, publish ``out``.

    What ``hiera train-reranker`` and ``hiera train-classifier`` share: a seeded
    run from ``args.base_model``, checkpoints under ``OUT.work`` (a rerun resumes
    from the newest), the ``--max-minutes`` budget, the F1-maximizing threshold on
    ``dev_pairs``, and an atomic publish of the model with ``hiera-reranker.json``
    (``report``'s fields, then the run's: threshold, dev, train, wall time, peak RSS).
    """
    import datasets
    import transformers
    from sentence_transformers import CrossEncoder, CrossEncoderTrainer
    from sentence_transformers.cross_encoder.losses import BinaryCrossEntropyLoss

    datasets.disable_progress_bars()
    out = Path(out)
    t0 = time.perf_counter() if t0 is None else t0
    transformers.set_seed(args.seed)
    with quiet_transformers():  # a fresh one-logit head: "newly initialized weights" is expected
        base = resolve_model_path(args.base_model)
        check_weights(base)
        model = CrossEncoder(str(base), num_labels=1, max_length=args.max_length, device=train_device(args), **LOCAL_ONLY)
    work = out.with_name(out.name + ".work")
    dataset = datasets.Dataset.from_dict(
        {"query": [a for a, _ in train_pairs], "passage": [b for _, b in train_pairs], "label": list(train_labels)}
    )
    callbacks = time_budget_callback(args.max_minutes)
    trainer = CrossEncoderTrainer(
        model=model,
        args=training_arguments(args, work / "checkpoints"),
        train_dataset=dataset,
        loss=BinaryCrossEntropyLoss(model),
        callbacks=callbacks,
    )
    resume = resume_point(work / "checkpoints", run_key(args.to_dict(), pairs_digest(train_pairs, train_labels)), log)
    if resume:
        log(f"resuming from {resume}")
    t = time.perf_counter()
    # the trainer prints its logs (stdout is for results); transformers' warnings are not for CLI users
    with contextlib.redirect_stdout(sys.stderr), quiet_transformers():
        result = train_resumed(trainer, resume)
    train_seconds = time.perf_counter() - t
    calib: dict[str, Any] = {"threshold": 0.5, "note": "no dev pairs: default threshold"}
    if dev_pairs and 0 < sum(dev_labels) < len(dev_labels):
        probs = model.predict(list(dev_pairs), batch_size=64, show_progress_bar=False)
        calib = calibrate_threshold(np.asarray(probs), np.asarray(dev_labels))
    tmp = out.with_name(out.name + ".partial")
    model.save(str(tmp))
    extra = dict(report or {})
    full = {
        "args": args.to_dict(),
        **{k: v for k, v in extra.items() if k != "train"},
        "threshold": calib["threshold"],
        "dev": calib,
        "train": {
            **extra.get("train", {}),
            "pairs": len(train_pairs),
            "positives": int(sum(train_labels)),
            **run_report(trainer, result, train_seconds, callbacks, resume, train_device(args)),
        },
        "seconds_total": round(time.perf_counter() - t0, 1),
        "peak_rss_mb": round(peak_rss_mb(), 1),
    }
    write_json_atomic(tmp / META_FILE, full)
    if before_publish is not None:  # calibrations that need the saved model (the reranker's weight)
        full.update(before_publish(tmp))
        write_json_atomic(tmp / META_FILE, full)
    publish(tmp, out)
    log(
        f"{name}: {full['train']['steps']} steps in {train_seconds:.0f}s; threshold {calib['threshold']:.3f} "
        f"(dev F1 {calib.get('f1', float('nan')):.3f}) → {out}"
    )
    return full
