"""``hiera train-reader``: an extractive reader trained from all-MiniLM-L6-v2 (no QA weights exist offline).

DPR's reader recipe on a CPU budget. Each training question becomes a group:
the passage that holds its answer (the SQuAD gold passage, else the first
BM25 passage containing an answer) read in the window that holds the answer
span, plus ``negatives`` BM25 passages without any answer. The span loss
teaches where answers start and end in the positive; the selection loss
teaches which passage of the group to trust, so at inference the reader can
rank several retrieved passages instead of assuming the right one is given.

The run is seeded, checkpoints every ``save_steps`` under ``OUT.work`` (a
rerun resumes from the newest), honours ``--max-minutes``, and publishes
``OUT`` atomically with ``hiera-reader.json`` (arguments, examples, wall
time, peak memory).
"""

from __future__ import annotations

import contextlib
import random
import shutil
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

from hiera.builds import open_collection
from hiera.collection import Collection
from hiera.encode import model_fingerprint, resolve_model_path
from hiera.errors import BadInputError, HieraError
from hiera.eval.questions import Question
from hiera.models import LOCAL_ONLY, check_weights, quiet_transformers
from hiera.read.features import make_windows, token_span
from hiera.read.model import (
    META_FILE,
    interpolate_weights,
    load_reader_model,
    new_reader_model,
    read_meta,
    save_reader,
)
from hiera.train import negatives as neg
from hiera.train.args import ReaderArgs
from hiera.train.common import (
    check_out,
    peak_rss_mb,
    publish,
    questions_digest,
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


def answer_offsets(text: str, answers: Sequence[str]) -> tuple[int, int] | None:
    """Where the first answer that occurs in ``text`` is (exact case first, then any case)."""
    for fold in (False, True):
        hay = text.lower() if fold else text
        for a in answers:
            a = a.strip()
            if not a:
                continue
            i = hay.find(a.lower() if fold else a)
            if i >= 0:
                return i, i + len(a)
    return None


def passage_title(pool: PassagePool, pos: int) -> str:
    """The title line the passage encoder sees (document title and section path)."""
    return pool.passage_input[pos][: len(pool.passage_input[pos]) - len(pool.passage_text[pos]) - 1]


@dataclass
class GroupReport:
    questions: int = 0
    groups: int = 0
    no_positive: int = 0
    no_span: int = 0  # the answer string was not found in the positive, or no window held it whole
    no_negatives: int = 0  # fewer passages without the answer than --negatives asks for
    positives_gold: int = 0
    hard_negatives: int = 0
    random_negatives: int = 0
    long_positives: int = 0  # positives read in a later window (the passage overflowed one window)


def reader_groups(
    col: Collection,
    pool: PassagePool,
    tokenizer: Any,
    questions: Sequence[Question],
    args: ReaderArgs,
    progress: bool = False,
) -> tuple[list[dict[str, np.ndarray]], GroupReport]:
    """One group of trimmed windows per usable question (window 0 holds the answer)."""
    rng = random.Random(args.seed)
    bm25 = col.bm25_passages
    rep = GroupReport(questions=len(questions))
    groups: list[dict[str, np.ndarray]] = []
    for q in tqdm(questions, desc="reader examples", unit="q", disable=not progress, leave=False):
        found = find_positive(pool, bm25, q, args.depth)
        if found is None:
            rep.no_positive += 1
            continue
        pos, source = found
        span = answer_offsets(pool.passage_text[pos], q.answers)
        if span is None:
            rep.no_span += 1
            continue
        judge = judge_for(pool, q)
        hard = neg.bm25_passages(bm25, q.text, judge, pos, args.negatives, args.depth)
        rand = neg.random_fill(len(pool.passage_ids), judge.passage, {pos, *hard}, args.negatives - len(hard), rng)
        negs = hard + rand
        if len(negs) < args.negatives:
            rep.no_negatives += 1
            continue
        pw = make_windows(tokenizer, q.text, [(passage_title(pool, pos), pool.passage_text[pos])], args.max_length, args.stride)
        at = next(((w, t) for w in range(len(pw)) if (t := token_span(pw, w, *span)) is not None), None)
        if at is None:
            rep.no_span += 1
            continue
        w, (s, e) = at
        rows = [_row(pw, w)]
        if negs:
            nw = make_windows(
                tokenizer, q.text, [(passage_title(pool, p), pool.passage_text[p]) for p in negs], args.max_length, args.stride
            )
            firsts = [int(np.flatnonzero(nw.passage == i)[0]) for i in range(len(negs))]
            rows += [_row(nw, i) for i in firsts]
        groups.append(_group(rows, s, e))
        rep.groups += 1
        rep.positives_gold += source == "gold"
        rep.hard_negatives += len(hard)
        rep.random_negatives += len(rand)
        rep.long_positives += w > 0
    return groups, rep


def _row(win: Any, w: int) -> dict[str, np.ndarray]:
    n = int(win.attention_mask[w].sum())
    row = {"input_ids": win.input_ids[w, :n], "attention_mask": win.attention_mask[w, :n], "context_mask": win.context[w, :n]}
    if win.token_type_ids is not None:
        row["token_type_ids"] = win.token_type_ids[w, :n]
    return row


def _group(rows: list[dict[str, np.ndarray]], start: int, end: int) -> dict[str, np.ndarray]:
    return {**{k: [r[k] for r in rows] for k in rows[0]}, "start_positions": start, "end_positions": end}  # type: ignore[dict-item]


def collate(batch: list[dict[str, Any]]) -> dict[str, Any]:
    """Groups → ``[B, P, L]`` tensors padded to the batch's longest window (not to ``max_length``)."""
    import torch

    longest = max(len(x) for g in batch for x in g["input_ids"])
    out: dict[str, Any] = {}
    for key in ("input_ids", "attention_mask", "token_type_ids", "context_mask"):
        if key not in batch[0]:
            continue
        arr = np.zeros((len(batch), len(batch[0][key]), longest), dtype=np.int64)
        for b, g in enumerate(batch):
            for p, x in enumerate(g[key]):
                arr[b, p, : len(x)] = x
        out[key] = torch.from_numpy(arr)
    out["start_positions"] = torch.tensor([g["start_positions"] for g in batch], dtype=torch.long)
    out["end_positions"] = torch.tensor([g["end_positions"] for g in batch], dtype=torch.long)
    return out


def base_reader(args: ReaderArgs) -> tuple[Any, Any]:
    """(tokenizer, reader model to train): fresh heads on ``args.base_model``, or the trained reader ``args.init``;
    its word embeddings frozen when ``args`` says so."""
    from transformers import AutoTokenizer

    if args.init:
        model, tokenizer, _ = load_reader_model(Path(args.init))
        model.train()
    else:
        base = resolve_model_path(args.base_model)
        check_weights(base)
        with quiet_transformers():
            tokenizer = AutoTokenizer.from_pretrained(str(base), use_fast=True, **LOCAL_ONLY)
            model = new_reader_model(base)
    if not getattr(tokenizer, "is_fast", False):
        raise HieraError(f"{args.init or args.base_model}: the reader needs a fast tokenizer (character offsets)")
    if args.freeze_embeddings:
        model.encoder.get_input_embeddings().weight.requires_grad_(False)
    return tokenizer, model


@dataclass
class FitResult:
    trainer: Any
    result: Any
    seconds: float
    callbacks: list[Any]


def fit_reader(model: Any, groups: Sequence[dict[str, Any]], args: ReaderArgs, work: Path,
               resume: str | None = None) -> FitResult:
    """Train ``model`` on prepared groups with ``args``' recipe (the one loop ``train_reader`` and benchmarks share)."""
    from transformers import Trainer, TrainingArguments

    targs = TrainingArguments(
        **training_kwargs(args, work / "checkpoints"),
        remove_unused_columns=False,
        label_names=["start_positions", "end_positions"],
    )
    callbacks = time_budget_callback(args.max_minutes)
    trainer = Trainer(model=model, args=targs, train_dataset=_Groups(list(groups)), data_collator=collate,
                      callbacks=callbacks)
    t = time.perf_counter()
    with contextlib.redirect_stdout(sys.stderr), quiet_transformers():
        result = train_resumed(trainer, resume)
    return FitResult(trainer, result, time.perf_counter() - t, callbacks)


def train_reader(
    index: str | Path,
    questions: Sequence[Question],
    out: str | Path,
    args: ReaderArgs,
    log: Callable[[str], None] = print,
    replay: Sequence[tuple[str | Path, Sequence[Question]]] = (),
) -> dict[str, Any]:
    """Groups, training, atomic publish of ``out``; returns the metadata written beside the weights.

    ``replay``: more ``(collection, questions)`` sources whose groups are shuffled in with these (each
    question's passages come from its own collection): a reader continued on new questions (``args.init``)
    keeps reading the old ones if some of them are trained on again.
    """
    args.check()
    require_training_libs()
    import datasets
    import transformers

    datasets.disable_progress_bars()
    t0 = time.perf_counter()
    out = check_out(out, META_FILE, "reader")
    if args.init and args.interpolate is not None and out.resolve() == Path(args.init).resolve():
        # a rerun would resume the checkpoint trained from the first reader and mix it with its own output
        raise BadInputError("--interpolate needs an --out other than --init: the reader it starts from must stay "
                            "as it was")
    col = open_collection(index)
    pool = PassagePool.from_collection(col)
    qs = sample_questions(questions, args.max_examples, args.seed)
    init = read_meta(Path(args.init)) if args.init else None  # a damaged reader fails here, before any work
    base = Path(args.init) if args.init else resolve_model_path(args.base_model)
    transformers.set_seed(args.seed)
    tokenizer, model = base_reader(args)
    positions = int(getattr(model.encoder.config, "max_position_embeddings", 0) or 0)
    if positions and args.max_length > positions:
        raise BadInputError(f"--max-length {args.max_length} is longer than the {positions} positions "
                            f"{args.init or args.base_model} reads")
    groups, rep = reader_groups(col, pool, tokenizer, qs, args, args.progress)
    replayed = []
    for index_r, questions_r in replay:
        col_r = open_collection(index_r)
        g, r = reader_groups(col_r, PassagePool.from_collection(col_r), tokenizer, list(questions_r), args, args.progress)
        groups += g
        replayed.append({"collection": str(col_r.root), "version": col_r.store.version,
                         "digest": questions_digest(list(questions_r)), "examples": vars(r)})
    if len(groups) < 2:
        raise HieraError(f"only {len(groups)} usable training questions (answers not found in the collection's passages)")
    log(
        f"reader: {rep.groups} groups from {rep.questions} questions ({rep.no_positive} without a positive, "
        f"{rep.no_span} without a findable span, {rep.no_negatives} without enough negatives); "
        f"{args.negatives} negatives each"
    )
    for r in replayed:
        log(f"replayed with them: {r['examples']['groups']} groups from {r['examples']['questions']} questions of "
            f"{r['collection']}")
    work = out.with_name(out.name + ".work")
    key = run_key(args.to_dict(), col.store.version, questions_digest(qs), len(groups), *replayed)
    resume = resume_point(work / "checkpoints", key, log)
    if resume:
        log(f"resuming from {resume}")
    fit = fit_reader(model, groups, args, work, resume)
    meta = {
        "max_length": args.max_length,
        "stride": args.stride,
        "args": args.to_dict(),
        "base_model": {"name": str(args.init or args.base_model), "fingerprint": model_fingerprint(base)},
        "collection": str(col.root),
        "examples": vars(rep),
        **({"replay": replayed} if replayed else {}),
        "train": run_report(fit.trainer, fit.result, fit.seconds, fit.callbacks, resume, train_device(args)),
        "seconds_total": round(time.perf_counter() - t0, 1),
        "peak_rss_mb": round(peak_rss_mb(), 1),
    }
    if init is not None:
        # continued training keeps the decoding its starting reader was calibrated with, and says where it came from
        meta["init"] = {"reader": str(args.init), "train": init.get("train"), "examples": init.get("examples")}
        if "decoding" in init:
            meta["decoding"] = init["decoding"]
    if args.interpolate is not None and args.interpolate < 1:
        interpolate_weights(model, Path(str(args.init)), args.interpolate)
        meta["init"]["interpolate"] = args.interpolate
        log(f"reader: weights interpolated, {args.interpolate} of the trained and {1 - args.interpolate:g} of {args.init}")
    tmp = out.with_name(out.name + ".partial")
    if tmp.exists():
        shutil.rmtree(tmp)
    model.eval()
    save_reader(model, tokenizer, tmp, meta)
    publish(tmp, out)
    loss = meta["train"]["train_loss"]
    log(f"reader: {meta['train']['steps']} steps in {fit.seconds:.0f}s "
        f"(loss {'not logged' if loss is None else f'{loss:.3f}'}) → {out}")
    return meta


class _Groups:
    """A map-style dataset over prepared groups (the Trainer shuffles it with the run's seed)."""

    def __init__(self, groups: list[dict[str, Any]]) -> None:
        self.groups = groups

    def __len__(self) -> int:
        return len(self.groups)

    def __getitem__(self, i: int) -> dict[str, Any]:
        return self.groups[i]
