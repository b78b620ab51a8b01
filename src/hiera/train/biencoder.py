"""Train a document- or passage-level dual encoder the way DHR does, on a CPU.

Loss: in-batch softmax with hard negatives (``MultipleNegativesRankingLoss``):
each question is scored against its positive, its own hard negatives and
every other text in the batch. Batches come from the no-duplicates sampler,
so a text that is one question's positive never shows up as another's
negative in the same batch (SQuAD has many questions per paragraph).

Iteration 2 encodes the corpus with the iteration-1 model, mines its top
irrelevant passages (or documents) for every question, adds them to the
iteration-1 negatives as the ``mined`` kind, and trains again from the base
model.

Layout of ``--out MODEL_DIR``: the final model (a sentence-transformers
directory, usable as ``hiera build --passage-encoder MODEL_DIR``) with
``hiera-train.json``; with two iterations the first model is kept at
``MODEL_DIR-iter1``. Examples and checkpoints live in ``MODEL_DIR.work``: run
the same command again after an interruption and it resumes there.
"""

from __future__ import annotations

import contextlib
import random
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from hiera.builds import open_collection
from hiera.encode import Encoder, model_fingerprint, resolve_model_path
from hiera.errors import HieraError
from hiera.eval.questions import Question
from hiera.io import write_json_atomic
from hiera.models import LOCAL_ONLY, check_weights, quiet_transformers
from hiera.train.args import TrainArgs
from hiera.train.common import (
    check_out,
    device_report,
    peak_rss_mb,
    publish,
    questions_digest,
    require_training_libs,
    resume_point,
    rows_digest,
    run_key,
    sample_questions,
    time_budget_callback,
    train_device,
    train_resumed,
    training_kwargs,
)
from hiera.train.examples import (
    Example,
    add_mined,
    build_examples,
    check_kinds,
    choose_negatives,
    load_examples,
    save_examples,
)
from hiera.train.pool import PassagePool


def training_rows(
    examples: Sequence[Example], pool: PassagePool, level: str, kinds: Sequence[str], n: int, seed: int
) -> dict[str, list[str]]:
    """Columns for the loss: ``anchor``, ``positive``, ``negative_1..n`` (texts)."""
    texts = pool.passage_input if level == "passage" else pool.doc_summary
    rng = random.Random(seed)
    rows: dict[str, list[str]] = {"anchor": [], "positive": [], **{f"negative_{i + 1}": [] for i in range(n)}}
    for ex in examples:
        negs = choose_negatives(ex, pool, level, kinds, n, rng) if n else []  # type: ignore[arg-type]
        if len(negs) < n:
            continue  # too few irrelevant texts anywhere (tiny corpora): skip rather than pad with junk
        rows["anchor"].append(ex.query)
        rows["positive"].append(texts[ex.positive(pool, level)])  # type: ignore[arg-type]
        for i, p in enumerate(negs):
            rows[f"negative_{i + 1}"].append(texts[p])
    return rows


def training_arguments(args: TrainArgs, output_dir: Path) -> Any:
    """The ``SentenceTransformerTrainingArguments`` of one bi-encoder run (shared fields: :func:`training_kwargs`)."""
    from sentence_transformers import SentenceTransformerTrainingArguments

    return SentenceTransformerTrainingArguments(**training_kwargs(args, output_dir), batch_sampler="no_duplicates")


def fit(
    rows: dict[str, list[str]], args: TrainArgs, run_dir: Path, dest: Path, log: Callable[[str], None] = print
) -> dict[str, Any]:
    """Train from ``args.base_model`` on ``rows``; checkpoints in ``run_dir``; the model goes to ``dest``."""
    import datasets
    import transformers
    from sentence_transformers import (
        SentenceTransformer,
        SentenceTransformerModelCardData,
        SentenceTransformerTrainer,
    )
    from sentence_transformers.sentence_transformer.losses import MultipleNegativesRankingLoss

    datasets.disable_progress_bars()
    if len(rows["anchor"]) < 2:
        raise HieraError(
            "fewer than 2 training examples survived; give more questions or a larger collection"
        )
    transformers.set_seed(args.seed)
    card = SentenceTransformerModelCardData(generate_widget_examples=False, **LOCAL_ONLY)  # no Hub look-ups for the card
    with quiet_transformers():
        base = resolve_model_path(args.base_model)
        check_weights(base)
        model = SentenceTransformer(str(base), device=train_device(args), model_card_data=card, **LOCAL_ONLY)
    if args.max_seq_length:
        model.max_seq_length = args.max_seq_length
    loss = MultipleNegativesRankingLoss(model, scale=args.scale)
    ckpt_dir = run_dir / "checkpoints"
    dataset = datasets.Dataset.from_dict(rows)
    callbacks = time_budget_callback(args.max_minutes)
    trainer = SentenceTransformerTrainer(
        model=model, args=training_arguments(args, ckpt_dir), train_dataset=dataset, loss=loss, callbacks=callbacks
    )
    resume = resume_point(ckpt_dir, run_key(args.to_dict(), rows_digest(rows)), log)
    if resume:
        log(f"resuming from {resume}")
    t = time.perf_counter()
    # the trainer prints its logs (stdout is for results); transformers' warnings are not for CLI users
    with contextlib.redirect_stdout(sys.stderr), quiet_transformers():
        out = train_resumed(trainer, resume)
    seconds = time.perf_counter() - t
    tmp = dest.with_name(dest.name + ".partial")
    model.save(str(tmp))
    publish(tmp, dest)
    return {
        "examples": len(rows["anchor"]),
        "hard_negatives_per_example": len(rows) - 2,
        "steps": int(trainer.state.global_step),
        "train_loss": float(out.training_loss),
        "seconds": round(seconds, 1),
        "stopped_by_budget": bool(callbacks and callbacks[0].stopped_early),
        "resumed_from": resume,
        "peak_rss_mb": round(peak_rss_mb(), 1),
        **device_report(train_device(args), int(trainer.state.global_step), seconds),
    }


def iteration2_questions(
    questions: Sequence[Question], first: Sequence[Question], args: TrainArgs
) -> Sequence[Question]:
    """Iteration 2's questions: iteration 1's (the paper), or with ``fresh`` a seeded sample of the others.

    A capped CPU budget (``max_examples``) leaves most of a large question set
    unused in iteration 1; ``fresh`` spends iteration 2 on questions the model
    has not seen, with negatives mined for them by the iteration-1 model. When
    no other questions remain it falls back to iteration 1's.
    """
    if args.iter2_questions != "fresh":
        return first
    seen = {q.id for q in first}
    rest = [q for q in questions if q.id not in seen]
    return sample_questions(rest, args.max_examples, args.seed + 1) if rest else first


def train_biencoder(
    index: str | Path,
    questions: Sequence[Question],
    out: str | Path,
    args: TrainArgs,
    log: Callable[[str], None] = print,
) -> dict[str, Any]:
    """``hiera train``: build examples, train (one or two iterations), publish ``out``."""
    args.check()
    require_training_libs()
    kinds = check_kinds(args.level, args.negatives)  # type: ignore[arg-type]
    out = check_out(out, "hiera-train.json", "model trained by hiera train", foreign=("fetchhr.json",))
    col = open_collection(index)
    t0 = time.perf_counter()
    pool = PassagePool.from_collection(col)
    qs = sample_questions(questions, args.max_examples, args.seed)
    work = out.with_name(out.name + ".work")
    work.mkdir(parents=True, exist_ok=True)
    meta = {
        "corpus_version": col.store.version,
        "passages": col.n_passages,
        "level": args.level,
        "kinds": [k for k in kinds if k != "mined"],
        "per_kind": args.per_kind,
        "depth": args.depth,
        "seed": args.seed,
        "questions": questions_digest(qs),
    }
    examples = load_examples(work / "iter1-examples.jsonl", meta)
    report: dict[str, Any] = {"args": args.to_dict(), "collection": str(col.root), "iterations": []}
    if examples is None:
        t = time.perf_counter()
        examples, built = build_examples(
            col,
            pool,
            qs,
            args.level,
            meta["kinds"],
            per_kind=args.per_kind,
            depth=args.depth,
            seed=args.seed,  # type: ignore[arg-type]
            progress=args.progress,
        )
        save_examples(work / "iter1-examples.jsonl", examples, meta)
        report["examples"] = {**built.to_dict(), "seconds": round(time.perf_counter() - t, 1)}
        log(
            f"examples: {built.kept} of {built.questions} questions kept ({built.dropped} without a positive); "
            f"negatives per question {built.negatives_mean}"
        )
    else:
        log(f"examples: reusing {len(examples)} from {work / 'iter1-examples.jsonl'}")
    hard_kinds = [k for k in meta["kinds"] if k != "in-batch"]
    n = args.hard_negatives if hard_kinds else 0
    first = out if args.iterations == 1 else out.with_name(out.name + "-iter1")
    rows = training_rows(examples, pool, args.level, hard_kinds, n, args.seed)
    log(
        f"iteration 1: {len(rows['anchor'])} examples, {n} hard negative(s) each from {hard_kinds or ['in-batch only']}"
    )
    stats = fit(rows, args, work / "iter1", first, log)
    report["iterations"].append({"model": str(first), **stats})
    log(f"iteration 1: {stats['steps']} steps in {stats['seconds']}s → {first}")

    if args.iterations == 2:
        qs2 = iteration2_questions(questions, qs, args)
        meta2 = {**meta, "questions": questions_digest(qs2), "mined_with": model_fingerprint(resolve_model_path(first))}
        examples2 = load_examples(work / "iter2-examples.jsonl", meta2)
        if examples2 is None:
            t = time.perf_counter()
            if qs2 is not qs:  # fresh questions: their own positives and iteration-1 kinds of negatives first
                examples, built2 = build_examples(
                    col, pool, qs2, args.level, meta["kinds"], per_kind=args.per_kind, depth=args.depth,
                    seed=args.seed + 1, progress=args.progress,  # type: ignore[arg-type]
                )
                report["examples_iter2"] = built2.to_dict()
                log(f"iteration 2: {built2.kept} of {built2.questions} fresh questions kept")
            encoder = Encoder(first)
            mean = add_mined(
                examples,
                pool,
                encoder,
                args.level,
                per_kind=args.per_kind,
                depth=args.depth,  # type: ignore[arg-type]
                progress=args.progress,
            )
            save_examples(work / "iter2-examples.jsonl", examples, meta2)
            report["mining"] = {
                "mined_per_question": round(mean, 2),
                "seconds": round(time.perf_counter() - t, 1),
            }
            log(f"mined {mean:.2f} negatives per question with the iteration-1 model")
            examples2 = examples
        kinds2 = [*hard_kinds, "mined"]
        n2 = max(n, 1)
        rows2 = training_rows(examples2, pool, args.level, kinds2, n2, args.seed + 1)
        # checkpoints are keyed by what iteration 2 trains on, so a resume never mixes two setups
        tag = "-fresh" if qs2 is not qs else ""
        if args.iter2_init == "iter1":  # continue from the first model instead of starting over
            args2, run2 = replace(args, base_model=str(first)), work / f"iter2{tag}-from-iter1"
        else:
            args2, run2 = args, work / f"iter2{tag}"
        stats2 = fit(rows2, args2, run2, out, log)
        report["iterations"].append({"model": str(out), "negatives": kinds2, "init": args2.base_model, **stats2})
        log(f"iteration 2: {stats2['steps']} steps in {stats2['seconds']}s → {out}")
    report["seconds_total"] = round(time.perf_counter() - t0, 1)
    report["peak_rss_mb"] = round(peak_rss_mb(), 1)
    write_json_atomic(out / "hiera-train.json", report)
    return report
