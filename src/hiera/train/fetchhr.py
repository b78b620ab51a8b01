"""``hiera train-fetchhr``: train FetchHR's per-layer heads (RNets) over a frozen query encoder.

Only the heads learn. The query encoder's layers and the passage encoder stay
frozen, so everything they produce is computed once and reused every epoch:

* the training questions' hidden states at every retrieving layer (one
  forward pass per question, stored float16 in ``OUT.work/states-L*.npy``);
* the positives' (and BM25 hard negatives') passage vectors, read from the
  collection's own float16 matrix: the vectors the heads must hit are the
  ones the index will search.

Loss: for each layer, the in-batch softmax contrastive loss of its query
vectors against the batch's positives (plus each question's hard negatives),
averaged over the layers. A passage that is the positive of two questions in
one batch is masked out as the other's negative. Adam with linear warm-up and
linear decay, dropout inside the heads.

Like ``hiera train``: a seeded question sample (``--max-examples``), examples
and states cached in ``OUT.work`` (a rerun reuses them), a checkpoint every
``save_steps`` and on a ``--max-minutes`` stop (the same command resumes
there), and the model directory published atomically with ``hiera-train.json``
(arguments, examples, wall time, peak RSS). ``fetchhr.json`` records the
passage encoder's fingerprint, which the retriever checks.
"""

from __future__ import annotations

import contextlib
import json
import math
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from hiera.builds import open_collection
from hiera.encode import Encoder
from hiera.errors import BadInputError, HieraError
from hiera.eval.questions import Question
from hiera.fetchhr.layers import parse_layers
from hiera.fetchhr.model import FetchHRModel, HeadConfig, LayerStates, encoder_record
from hiera.io import load_npy, write_atomic, write_json_atomic
from hiera.models import autocast_dtype
from hiera.train.common import (
    check_out,
    device_report,
    digest,
    peak_rss_mb,
    publish,
    questions_digest,
    sample_questions,
    train_device,
)
from hiera.train.examples import Example, build_examples, choose_negatives, load_examples, save_examples
from hiera.train.pool import PassagePool

CHECKPOINT = "checkpoint.pt"


@dataclass
class FetchHRArgs:
    """How ``hiera train-fetchhr`` trains the heads (the paper's recipe, sized for a CPU)."""

    layers: str | None = None  # None: every layer of the query encoder
    base_model: str | None = None  # the query encoder; None: the collection's passage encoder (a bi-encoder)
    batch_size: int = 64
    epochs: float = 1.0
    max_steps: int | None = None
    max_examples: int | None = None
    learning_rate: float = 2e-5  # the paper's
    warmup_ratio: float = 0.1
    hard_negatives: int = 0  # BM25 negatives per question beside the in-batch ones
    scale: float = 20.0  # inverse temperature of the softmax over cosines (MultipleNegativesRankingLoss's)
    dropout: float = 0.1
    depth: int = 2  # transformer layers per head (the paper's two)
    seed: int = 42
    save_steps: int = 100
    max_minutes: float | None = None
    bm25_depth: int = 100
    progress: bool = True
    device: str = "auto"  # auto (a GPU when torch sees one), cpu, cuda: mixed precision on a GPU

    def check(self) -> FetchHRArgs:
        if self.batch_size < 2:
            raise BadInputError("--batch-size must be at least 2 (in-batch negatives need company)")
        if self.epochs <= 0 and not self.max_steps:
            raise BadInputError("--epochs must be positive")
        for name in ("save_steps", "depth", "bm25_depth"):
            if getattr(self, name) <= 0:
                raise BadInputError(f"--{name.replace('_', '-')} must be positive, got {getattr(self, name)}")
        if self.max_steps is not None and self.max_steps <= 0:
            raise BadInputError("--max-steps must be positive")
        if self.max_examples is not None and self.max_examples <= 0:
            raise BadInputError("--max-examples must be positive")
        if self.hard_negatives < 0:
            raise BadInputError("--hard-negatives must be ≥ 0")
        if not self.learning_rate > 0:
            raise BadInputError("--lr must be positive")
        if not 0.0 <= self.warmup_ratio < 1.0:
            raise BadInputError(f"--warmup-ratio must be in [0, 1), got {self.warmup_ratio}")
        if not 0.0 <= self.dropout < 1.0:
            raise BadInputError(f"--dropout must be in [0, 1), got {self.dropout}")
        return self

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


# -- frozen inputs, computed once ------------------------------------------------------------------------------
class StateStore:
    """Hidden states of the training questions per layer: flat float16 token rows plus offsets, on disk."""

    def __init__(self, folder: Path, layers: Sequence[int]) -> None:
        self.folder = folder
        self.offsets = load_npy(folder / "offsets.npy")
        self.states = {n: load_npy(folder / f"states-L{n}.npy", mmap=True) for n in layers}

    def batch(self, rows: Sequence[int]) -> tuple[dict[int, Any], Any]:
        """``({layer: (b, T, dim) float32 tensor}, mask (b, T))`` for question rows, padded to the longest."""
        import torch

        lens = [int(self.offsets[r + 1] - self.offsets[r]) for r in rows]
        t = max(lens)
        mask = torch.zeros(len(rows), t, dtype=torch.long)
        out = {}
        for n, arr in self.states.items():
            buf = np.zeros((len(rows), t, arr.shape[1]), dtype=np.float32)
            for i, r in enumerate(rows):
                buf[i, : lens[i]] = arr[self.offsets[r] : self.offsets[r + 1]]
            out[n] = torch.from_numpy(buf)
        for i, n_tok in enumerate(lens):
            mask[i, :n_tok] = 1
        return out, mask


def compute_states(
    encoder: Encoder, texts: Sequence[str], layers: Sequence[int], folder: Path, key: str, progress: bool = True
) -> StateStore:
    """Run the frozen encoder over ``texts`` once (reused while ``key`` matches) and store every layer's states."""
    from tqdm import tqdm

    stamp = folder / "states.json"
    if stamp.is_file() and json.loads(stamp.read_text()).get("key") == key:
        return StateStore(folder, layers)
    folder.mkdir(parents=True, exist_ok=True)
    ls = LayerStates(encoder)
    chunks: dict[int, list[np.ndarray]] = {n: [] for n in layers}
    lens: list[int] = []
    for start in tqdm(range(0, len(texts), 64), desc="fetchhr: question states", disable=not progress, leave=False):
        states, mask = ls(texts[start : start + 64], layers)
        m = mask.numpy().astype(bool)
        for i in range(m.shape[0]):
            lens.append(int(m[i].sum()))
            for n in layers:
                chunks[n].append(states[n][i][m[i]].numpy().astype(np.float16))
    offsets = np.concatenate([[0], np.cumsum(lens)]).astype(np.int64)
    for n in layers:
        matrix = np.concatenate(chunks[n])
        write_atomic(folder / f"states-L{n}.npy", lambda tmp, m=matrix: _save_npy(tmp, m))
    np.save(folder / "offsets.npy", offsets)
    write_json_atomic(stamp, {"key": key, "questions": len(texts), "layers": list(layers)})
    return StateStore(folder, layers)


def _save_npy(path: Path, matrix: np.ndarray) -> None:
    with open(path, "wb") as fh:  # through a handle: np.save would add ".npy" to a temporary name
        np.save(fh, matrix)


def contrastive_loss(q: Any, cands: Any, cand_ids: Any, n_pos: int, scale: float) -> Any:
    """In-batch softmax over ``cands`` (the batch's positives first, then hard negatives); row i's target is i.

    A candidate that is the same passage as row i's positive (SQuAD asks many
    questions of one paragraph) is masked out rather than counted as a negative.
    """
    import torch

    logits = scale * q.float() @ cands.float().T
    same = cand_ids.unsqueeze(0) == cand_ids[:n_pos].unsqueeze(1)
    diag = torch.arange(n_pos, device=logits.device)
    same[diag, diag] = False
    logits = logits.masked_fill(same, float("-inf"))
    return torch.nn.functional.cross_entropy(logits, diag)


def lr_lambda(total: int, warmup: int) -> Callable[[int], float]:
    """Linear warm-up to the peak, then linear decay to zero at ``total`` steps."""

    def f(step: int) -> float:
        if warmup and step < warmup:
            return (step + 1) / warmup
        return max(0.0, (total - step) / max(1, total - warmup))

    return f


def _key(*parts: Any) -> str:
    return digest([json.dumps(parts, sort_keys=True, default=str)])


# -- the run -------------------------------------------------------------------------------------------------
def train_fetchhr(
    index: str | Path,
    questions: Sequence[Question],
    out: str | Path,
    args: FetchHRArgs,
    log: Callable[[str], None] = print,
) -> dict[str, Any]:
    """Build examples, cache the frozen inputs, train the heads (resumable), publish ``out``."""
    import torch
    from tqdm import tqdm

    from hiera.fetchhr.rnet import RNetSet

    args.check()
    out = check_out(out, "fetchhr.json", "FetchHR model")
    t0 = time.perf_counter()
    col = open_collection(index)
    if "passage" not in col.manifest.models:
        raise HieraError(f"{col.root} has no dense passage index; FetchHR's heads target its passage vectors")
    passage_fp = col.manifest.models["passage"]["fingerprint"]
    device = train_device(args)
    encoder = Encoder(args.base_model or col.manifest.models["passage"]["path"], use_cache=False, backend="torch",
                      device=device)
    ls = LayerStates(encoder)
    layers = parse_layers(args.layers, range(1, ls.num_layers + 1))
    if ls.dim != int(col.manifest.models["passage"]["dim"]):
        raise HieraError(
            f"the query encoder's hidden size {ls.dim} differs from the passage vectors' {col.manifest.models['passage']['dim']}"
        )
    pool = PassagePool.from_collection(col)
    qs = sample_questions(questions, args.max_examples, args.seed)
    work = out.with_name(out.name + ".work")
    work.mkdir(parents=True, exist_ok=True)

    # examples: positives (gold passage, else the first BM25 passage with the answer) and BM25 negatives
    kinds = ["in-batch", "bm25"] if args.hard_negatives else ["in-batch"]
    meta = {"corpus_version": col.store.version, "passages": col.n_passages, "kinds": kinds, "depth": args.bm25_depth,
            "seed": args.seed, "questions": questions_digest(qs)}
    report: dict[str, Any] = {"args": args.to_dict(), "collection": str(col.root), "layers": layers}
    examples = load_examples(work / "examples.jsonl", meta)
    if examples is None:
        examples, built = build_examples(col, pool, qs, "passage", kinds, per_kind=max(4, args.hard_negatives),
                                         depth=args.bm25_depth, seed=args.seed, progress=args.progress)
        save_examples(work / "examples.jsonl", examples, meta)
        report["examples"] = built.to_dict()
        log(f"examples: {built.kept} of {built.questions} questions kept ({built.dropped} without a positive)")
    else:
        report["examples"] = {"kept": len(examples), "reused": str(work / "examples.jsonl")}
        log(f"examples: reusing {len(examples)} from {work / 'examples.jsonl'}")
    if len(examples) < 2:
        raise HieraError("fewer than 2 training examples survived; give more questions or a larger collection")

    t = time.perf_counter()
    store = compute_states(encoder, [ex.query for ex in examples], layers, work / "states",
                           _key(encoder.fingerprint, meta, layers), args.progress)
    report["states_seconds"] = round(time.perf_counter() - t, 1)
    pos_ids, neg_ids = _candidates(examples, pool, args)
    vectors = col.passage_vectors

    cfg = HeadConfig(layers=layers, dim=ls.dim, heads=int(ls.backbone.config.num_attention_heads),
                     ffn=int(ls.backbone.config.intermediate_size), depth=args.depth, dropout=args.dropout,
                     query_encoder=encoder_record(encoder, ls.num_layers), passage_fingerprint=passage_fp)
    torch.manual_seed(args.seed)
    heads = RNetSet(layers, cfg.dim, cfg.heads, cfg.ffn, cfg.depth, cfg.dropout).to(device)
    opt = torch.optim.Adam(heads.parameters(), lr=args.learning_rate)
    mixed = autocast_dtype(device)  # bf16 (no scaling needed) or fp16 with a gradient scaler, on a GPU only
    scaler = torch.amp.GradScaler("cuda", enabled=mixed == "float16")
    per_epoch = math.ceil(len(examples) / args.batch_size)
    total = args.max_steps or max(1, math.ceil(args.epochs * per_epoch))
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_lambda(total, int(args.warmup_ratio * total)))

    run_key = _key(cfg.to_dict(), args.to_dict() | {"max_minutes": None, "progress": None, "device": None}, meta)
    step, resumed = 0, None
    ckpt = work / CHECKPOINT
    if ckpt.is_file():
        state = torch.load(ckpt, weights_only=True, map_location=device)  # our own file; weights_only never runs code
        if state.get("key") == run_key:
            heads.load_state_dict(state["heads"])
            opt.load_state_dict(state["opt"])
            sched.load_state_dict(state["sched"])
            torch.set_rng_state(state["rng"].cpu())
            step, resumed = int(state["step"]), str(ckpt)
            log(f"resuming from {ckpt} at step {step}")
        else:
            log(f"{ckpt} belongs to another setup; starting over")

    def save_checkpoint() -> None:
        state = {"key": run_key, "heads": heads.state_dict(), "opt": opt.state_dict(),
                 "sched": sched.state_dict(), "rng": torch.get_rng_state(), "step": step}
        write_atomic(ckpt, lambda tmp: torch.save(state, tmp))

    heads.train()
    losses: list[float] = []
    stopped = False
    t_train = time.monotonic()
    bar = tqdm(total=total, initial=step, desc="fetchhr: train", disable=not args.progress, leave=False)
    while step < total and not stopped:
        epoch = step // per_epoch
        order = np.random.default_rng(args.seed + epoch).permutation(len(examples))
        for b in range(step % per_epoch, per_epoch):
            if step >= total:
                break
            rows = order[b * args.batch_size : (b + 1) * args.batch_size].tolist()
            if len(rows) < 2:
                step += 1
                continue
            states, mask = store.batch(rows)
            states, mask = {n: t.to(device, non_blocking=True) for n, t in states.items()}, mask.to(device)
            ids = np.concatenate([pos_ids[rows], neg_ids[rows].reshape(-1)]) if neg_ids.size else pos_ids[rows]
            cands = torch.from_numpy(np.asarray(vectors[np.asarray(ids)], dtype=np.float32)).to(device)
            with torch.autocast("cuda", dtype=getattr(torch, mixed)) if mixed else contextlib.nullcontext():
                qv = heads(states, mask)
                loss = torch.stack([contrastive_loss(qv[n], cands, torch.from_numpy(ids).to(device), len(rows),
                                                     args.scale) for n in layers]).mean()
            opt.zero_grad()
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
            sched.step()
            step += 1
            losses.append(loss.item())
            bar.update(1)
            if step % 20 == 0:
                bar.set_postfix(loss=f"{np.mean(losses[-20:]):.3f}")
            if step % args.save_steps == 0:
                save_checkpoint()
            if args.max_minutes and time.monotonic() - t_train > args.max_minutes * 60:
                stopped = True
                break
    bar.close()
    save_checkpoint()
    seconds = time.monotonic() - t_train

    tmp = out.with_name(out.name + ".partial")
    if tmp.exists():
        import shutil

        shutil.rmtree(tmp)
    FetchHRModel(cfg, encoder, heads.cpu()).save(tmp)
    report.update({
        "steps": step, "total_steps": total, "examples_used": len(examples),
        "loss_first": round(float(np.mean(losses[:20])), 4) if losses else None,
        "loss_last": round(float(np.mean(losses[-20:])), 4) if losses else None,
        "loss_per_10_steps": [round(float(np.mean(losses[i : i + 10])), 4) for i in range(0, len(losses), 10)],
        "train_seconds": round(seconds, 1), "stopped_by_budget": stopped, "resumed_from": resumed,
        "query_encoder": cfg.query_encoder, "passage_fingerprint": passage_fp,
        "head_parameters": int(sum(p.numel() for p in heads.parameters())),
        "seconds_total": round(time.perf_counter() - t0, 1), "peak_rss_mb": round(peak_rss_mb(), 1),
        **device_report(device, step, seconds),
    })
    write_json_atomic(tmp / "hiera-train.json", report)
    publish(tmp, out)
    log(f"fetchhr: {step} steps in {seconds:.0f}s → {out}")
    return report


def _candidates(examples: Sequence[Example], pool: PassagePool, args: FetchHRArgs) -> tuple[np.ndarray, np.ndarray]:
    """Positive passage positions (n,) and ``hard_negatives`` BM25 negatives per example (n, h), seeded."""
    rng = random.Random(args.seed)
    pos = np.asarray([ex.positive_passage for ex in examples], dtype=np.int64)
    h = args.hard_negatives
    neg = np.zeros((len(examples), h), dtype=np.int64)
    if h:
        for i, ex in enumerate(examples):
            neg[i] = choose_negatives(ex, pool, "passage", ["bm25"], h, rng)
    return pos, neg
