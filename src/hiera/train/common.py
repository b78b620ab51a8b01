"""What both trainers share: budgets, resumable checkpoints, atomic publishing."""

from __future__ import annotations

import hashlib
import json
import random
import resource
import shutil
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from hiera.errors import BadInputError, HieraError
from hiera.eval.questions import Question
from hiera.io import write_json_atomic
from hiera.models import autocast_dtype, peak_memory, resolve_device

T = TypeVar("T")


def require_training_libs() -> None:
    """``datasets`` and ``accelerate`` come with the ``train`` extra; say so instead of a traceback."""
    import importlib.util

    missing = [m for m in ("datasets", "accelerate") if importlib.util.find_spec(m) is None]
    if missing:
        raise HieraError(f"training needs {', '.join(missing)}: pip install 'hiera[train]'")


def sample_questions(questions: Sequence[Question], limit: int | None, seed: int) -> list[Question]:
    """A seeded sample (in original order) when a CPU budget caps the examples."""
    qs = list(questions)
    if not qs:
        raise BadInputError("no training questions")
    if limit is None or limit >= len(qs):
        return qs
    keep = sorted(random.Random(seed).sample(range(len(qs)), limit))
    return [qs[i] for i in keep]


def holdout(items: Sequence[T], fraction: float, seed: int) -> tuple[list[T], list[T]]:
    """(kept, held out): a seeded ``fraction`` of ``items`` held out, both in their original order.

    At least one item is held out when ``fraction`` > 0, and none when there are
    fewer than two (a lone item trains). The same seed and length hold out the
    same positions on every run, so a resumed run calibrates on the same items.
    """
    if fraction <= 0 or len(items) < 2:
        return list(items), []
    order = list(range(len(items)))
    random.Random(seed).shuffle(order)
    held = set(order[: max(1, int(round(len(items) * fraction)))])
    return [x for i, x in enumerate(items) if i not in held], [x for i, x in enumerate(items) if i in held]


def digest(chunks: Iterable[str | bytes]) -> str:
    """16 hex digits of SHA-256 over ``chunks`` in order: what a run, a cache or a model was made from."""
    h = hashlib.sha256()
    for c in chunks:
        h.update(c.encode() if isinstance(c, str) else c)
    return h.hexdigest()[:16]


def questions_digest(questions: Sequence[Question]) -> str:
    return digest(f"{q.id}\x00{q.text}\x00" for q in questions)


def checkpoint_step(path: str | Path) -> int | None:
    """N of a ``checkpoint-N`` directory (the global step it was saved at); None for any other name."""
    name = Path(path).name
    step = name.removeprefix("checkpoint-")
    return int(step) if step != name and step.isdigit() else None


def last_checkpoint(folder: Path) -> str | None:
    """The newest complete ``checkpoint-N`` under ``folder`` (resume point), if any."""
    if not folder.is_dir():
        return None
    cands = [(step, p) for p in folder.iterdir()
             if (step := checkpoint_step(p)) is not None and (p / "trainer_state.json").exists()]
    return str(max(cands)[1]) if cands else None


# What may differ between a run and its resumption: its length and budget (an interrupted or budget-stopped run
# resumed with more steps continues it), the display, the device, and the reader's interpolation toward its
# starting weights (applied to the weights it saves, never to a checkpoint); not the data or the recipe.
RESUMABLE_FIELDS = ("max_minutes", "max_steps", "epochs", "progress", "save_steps", "device", "interpolate")
RUN_KEY_FILE = "run-key.json"


def run_key(args: dict[str, Any], *data: Any) -> str:
    """A digest of a run's arguments (less :data:`RESUMABLE_FIELDS`) and of what it trains on.

    An argument left unset (None) is not part of the key: a field added to the arguments later, unset by default,
    leaves the keys of runs made before it unchanged, so their checkpoints are resumed instead of removed.
    """
    kept = {k: v for k, v in args.items() if k not in RESUMABLE_FIELDS and v is not None}
    return digest([json.dumps(kept, sort_keys=True, default=str),
                   *("\x00" + json.dumps(part, sort_keys=True, default=str) for part in data)])


def pairs_digest(pairs: Sequence[tuple[str, str]], labels: Sequence[float]) -> str:
    """What a cross-encoder run trains on (pairs and labels, in order)."""
    return digest(f"{a}\x00{b}\x00{y}\x01" for (a, b), y in zip(pairs, labels, strict=True))


def rows_digest(rows: dict[str, list[str]]) -> str:
    """What a bi-encoder run trains on (every column, in order)."""
    return digest(chunk for name in sorted(rows) for chunk in (name + "\x02", *(t + "\x00" for t in rows[name])))


def resume_point(folder: Path, key: str, log: Callable[[str], None] = print) -> str | None:
    """The checkpoint to resume from, only when ``folder``'s checkpoints belong to the run ``key`` names.

    Resuming another run's checkpoint (other training data or arguments under
    the same ``--out``) would silently continue the wrong model, and a finished
    run's last checkpoint would end the new run at once; such checkpoints are
    removed, and the key is written before the first one is saved.
    """
    marker = folder / RUN_KEY_FILE
    try:
        old = json.loads(marker.read_text(encoding="utf-8")).get("key") if marker.exists() else None
    except (OSError, ValueError, AttributeError):
        old = None
    if old == key:
        return last_checkpoint(folder)
    if folder.exists() and any(p.name.startswith("checkpoint-") for p in folder.iterdir()):
        log(f"{folder} holds checkpoints of another run (other data or arguments): starting afresh")
        shutil.rmtree(folder)
    folder.mkdir(parents=True, exist_ok=True)
    write_json_atomic(marker, {"key": key})
    return None


def time_budget_callback(max_minutes: float | None) -> list[Any]:
    """A transformers callback that stops (and saves) once training has run ``max_minutes``."""
    if not max_minutes:
        return []
    from transformers import TrainerCallback

    class _Budget(TrainerCallback):
        def __init__(self) -> None:
            self.t0 = time.monotonic()
            self.stopped_early = False

        def on_step_end(self, args, state, control, **kwargs):  # noqa: ANN001
            if time.monotonic() - self.t0 > max_minutes * 60:
                control.should_training_stop = True
                control.should_save = True
                self.stopped_early = True
            return control

    return [_Budget()]


def train_resumed(trainer: Any, resume: str | None) -> Any:
    """``trainer.train(resume_from_checkpoint=resume)``, which trains nothing when the checkpoint ends the run.

    transformers resumes a checkpoint saved mid-epoch at the run's last step
    (``--max-steps``) by taking one more step before it checks the limit, so
    rerunning a finished run would train past it, one step more each time. A
    step that would begin at or past the last one stops the run instead, with
    the checkpoint's weights loaded and no step taken.
    """
    from transformers import TrainerCallback
    from transformers.trainer_utils import TrainOutput

    class _Done(Exception):
        pass

    class _Last(TrainerCallback):
        def on_step_begin(self, args, state, control, **kwargs):  # noqa: ANN001
            if state.max_steps > 0 and state.global_step >= state.max_steps:
                raise _Done
            return control

    guard = _Last()
    trainer.add_callback(guard)
    try:
        return trainer.train(resume_from_checkpoint=resume)
    except _Done:
        return TrainOutput(trainer.state.global_step, 0.0, {})
    finally:
        trainer.remove_callback(guard)


def check_out(out: str | Path, marker: str, what: str, foreign: tuple[str, ...] = (), kind: str | None = None) -> Path:
    """``out`` if a finished training may replace it: absent, an empty directory, or a model of this kind (``what``
    names it) that a training wrote (it holds ``marker``, none of ``foreign`` — files of another kind sharing that marker — and, in the marker's
    JSON, ``kind`` as its ``kind``, or none when ``kind`` is None). Anything else (a
    collection, another kind of model, a folder of the user's files) is refused in one line before any work:
    publishing swaps the whole directory out and deletes it. So are the names it writes beside ``out``
    (``OUT.partial``, ``OUT.old``) when they hold something that is not such a model."""
    out = Path(out)
    for side in (out.with_name(out.name + ".partial"), out.with_name(out.name + ".old")):
        if side.exists() and not _ours(side, marker, foreign, kind):
            raise BadInputError(f"{side} is in the way: a training writes there beside --out {out}; move it, or "
                                "remove it if an interrupted training left it")
    if not out.exists():
        return out
    if not out.is_dir():
        raise BadInputError(f"--out {out} is a file; give a directory for the {what}")
    if _ours(out, marker, foreign, kind):
        return out
    raise BadInputError(
        f"--out {out} already holds something that is not a {what} (no {marker}); a finished training replaces "
        "the whole directory, so give a new or empty one"
    )


def _ours(path: Path, marker: str, foreign: tuple[str, ...], kind: str | None) -> bool:
    """An empty directory, or a model of the kind ``marker``, ``foreign`` and ``kind`` describe."""
    if not path.is_dir():
        return False
    if not any(path.iterdir()):
        return True
    if not (path / marker).is_file() or any((path / f).exists() for f in foreign):
        return False
    if not marker.endswith(".json"):
        return True
    try:
        meta = json.loads((path / marker).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(meta, dict) and meta.get("kind") == kind


def publish(tmp: Path, dest: Path) -> None:
    """Replace ``dest`` with the finished ``tmp`` directory; a failure leaves the old one in place.

    Where the kernel can swap two names in one step (Linux's ``renameat2`` with ``RENAME_EXCHANGE``) it does,
    so a kill at any moment leaves ``dest`` whole, old or new; elsewhere the old directory is renamed aside
    first, and for that instant ``dest`` does not exist."""
    if dest.is_dir() and _exchange(tmp, dest):
        shutil.rmtree(tmp)  # now the old model
        return
    old = dest.with_name(dest.name + ".old")
    if old.exists():
        shutil.rmtree(old)
    if dest.exists():
        dest.rename(old)
    tmp.rename(dest)
    if old.exists():
        shutil.rmtree(old)


def _exchange(a: Path, b: Path) -> bool:
    """Swap the names ``a`` and ``b`` atomically; False where the platform cannot (nothing was changed)."""
    import ctypes
    import os

    try:
        renameat2 = ctypes.CDLL(None, use_errno=True).renameat2
    except (AttributeError, OSError):
        return False
    at_fdcwd, rename_exchange = -100, 2
    return renameat2(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange) == 0


def run_report(trainer: Any, result: Any, seconds: float, callbacks: list[Any], resume: str | None,
               device: str = "cpu") -> dict[str, Any]:
    """What every trainer records of its run: steps, final loss, time, whether the budget stopped it, resume point,
    and where it ran (:func:`device_report`)."""
    steps = int(trainer.state.global_step)
    start = (checkpoint_step(resume) or 0) if resume else 0
    report: dict[str, Any] = {
        "steps": steps,
        "train_loss": float(result.training_loss),
        "seconds": round(seconds, 1),
        "stopped_by_budget": bool(callbacks and callbacks[0].stopped_early),
        "resumed_from": resume,
        **device_report(device, steps - start, seconds),
    }
    if start:
        # the trainer's own loss covers only the steps of this call (0 when a finished run is resumed): the
        # model's is the mean of every loss logged since step 1, which the checkpoint's state carries
        logged = [float(e["loss"]) for e in trainer.state.log_history if "loss" in e]
        report["train_loss"] = round(sum(logged) / len(logged), 4) if logged else None
        report["steps_this_call"] = steps - start
    return report


def device_report(device: str, steps: int, seconds: float) -> dict[str, Any]:
    """Where a run trained and how fast: device, mixed precision, steps/s, peak memory (GPU's on CUDA, else RSS)."""
    return {"device": device, "mixed_precision": autocast_dtype(device) or "none",
            "steps_per_second": round(steps / seconds, 3) if seconds > 0 else None, **peak_memory(device)}


def train_device(args: Any) -> str:
    """``cpu`` or ``cuda`` for a run's ``device`` field (a one-line error for ``cuda`` without a GPU)."""
    return resolve_device(getattr(args, "device", "auto"))


def peak_rss_mb() -> float:
    """Peak resident memory of this process so far (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def training_kwargs(args: Any, output_dir: Path) -> dict[str, Any]:
    """The training-argument fields every hiera trainer shares (device, seeded, resumable checkpoints).

    ``args.warmup_ratio`` is a fraction of the run's steps: transformers 5
    dropped ``warmup_ratio`` and reads a ``warmup_steps`` below 1 as that
    fraction (1 or more would count steps, so the argument checks refuse it).
    On a GPU the run uses mixed precision (:func:`hiera.models.autocast_dtype`:
    bf16 where the card has it, else fp16 with loss scaling).
    """
    device = train_device(args)
    mixed = autocast_dtype(device)
    return {
        "output_dir": str(output_dir),
        "num_train_epochs": args.epochs,
        "max_steps": args.max_steps if args.max_steps else -1,
        "per_device_train_batch_size": args.batch_size,
        "learning_rate": args.learning_rate,
        "warmup_steps": float(args.warmup_ratio),
        "seed": args.seed,
        "data_seed": args.seed,
        "save_strategy": "steps",
        "save_steps": args.save_steps,
        "save_total_limit": 1,
        "logging_steps": 10,
        "report_to": "none",
        "use_cpu": device == "cpu",
        "bf16": mixed == "bfloat16",
        "fp16": mixed == "float16",
        "dataloader_num_workers": 0,
        "disable_tqdm": not args.progress,
    }
