"""Loading Hugging Face models the way hiera needs them: from local files only, and without library chatter.

Encoders, rerankers and trainers all load local model directories; none of
them may reach for the network (hiera never downloads weights). Each load
says so itself (:data:`LOCAL_ONLY`) rather than through ``HF_HUB_OFFLINE``:
an environment variable would also cut off the Hub for the application that
imported hiera (a LangChain or LlamaIndex program loading its own models). A
load must not change how ``transformers`` logs for the rest of the process
either.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from types import MappingProxyType

from hiera.errors import BadInputError, HieraError

# Passed to every ``from_pretrained`` and sentence-transformers constructor hiera calls: the load reads
# the local directory and never asks the Hub (trainers report to nothing: ``report_to="none"``).
LOCAL_ONLY: Mapping[str, bool] = MappingProxyType({"local_files_only": True})


def passive_threads() -> dict[str, str]:
    """Let idle OpenMP threads sleep instead of spinning; an explicit setting in the environment wins.

    torch (encoding) and FAISS (search) each bring their own OpenMP runtime
    with a thread per core, and an idle OpenMP thread spins for a while after
    each parallel region by default. On a small machine the spinning threads
    of one library then steal the cores the next one needs: on 2 cores,
    ``dhr``'s query encoding took 28 ms at p50 and 110 ms at p95 after its
    document stage, against 14 / 18 ms in ``dense``; with sleeping threads 21 /
    28 ms, and DHR's p95 fell from 123 to 43 ms, with no loss of encoding
    throughput (bench/README.md, "Threads"). The runtimes read the setting
    once, when they load, so this runs before the first model or index is
    opened (the CLI's entry point; Ray replicas get it in their environment).
    Returns the variables, for processes started elsewhere.
    """
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    return {"OMP_WAIT_POLICY": os.environ["OMP_WAIT_POLICY"]}


@contextmanager
def quiet_transformers() -> Iterator[None]:
    """Silence ``transformers`` warnings and progress bars inside the block, then restore both.

    Loading a local model prints a weight-loading bar and hub-oriented
    warnings on every start; turning them off for good would also hide them
    from a program that imports hiera.
    """
    from transformers.utils import logging as hf_logging

    level, bars = hf_logging.get_verbosity(), hf_logging.is_progress_bar_enabled()
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        hf_logging.set_verbosity(level)
        if bars:
            hf_logging.enable_progress_bar()


# -- pickle-free loading ---------------------------------------------------------------------------------
TRUST_ENV = "HIERA_TRUST_PICKLE"
PICKLE_SUFFIXES = frozenset({".bin", ".pt", ".pth", ".pkl", ".pickle", ".ckpt"})
# Trainer state files: pickles, but never loaded as model weights.
TRAINER_FILES = frozenset({"training_args.bin", "optimizer.pt", "scheduler.pt", "rng_state.pth", "scaler.pt"})


def trust_pickle(flag: bool | None = None) -> bool:
    """An explicit ``flag`` wins; otherwise ``HIERA_TRUST_PICKLE=1`` (what ``--trust-pickle`` sets)."""
    return bool(flag) if flag is not None else os.environ.get(TRUST_ENV) == "1"


def check_weights(path: Path, trust: bool | None = None) -> None:
    """Refuse a model directory whose weights are pickles (``*.bin``, ``*.pt`` …) with no safetensors beside them.

    Unpickling runs code chosen by whoever wrote the file, so hiera loads
    safetensors only unless the user says they trust the model
    (``--trust-pickle`` or ``HIERA_TRUST_PICKLE=1``). Each module folder of a
    sentence-transformers model (``2_Dense/`` …) is checked on its own.
    """
    if trust_pickle(trust):
        return
    root = Path(path)
    if not root.is_dir():
        return
    for folder, dirs, files in os.walk(root):
        depth = len(Path(folder).relative_to(root).parts)
        dirs[:] = [d for d in dirs if not d.startswith(".") and not d.startswith("checkpoint-") and depth < 2]
        pickles = sorted(f for f in files if Path(f).suffix in PICKLE_SUFFIXES and f not in TRAINER_FILES)
        if pickles and not any(f.endswith(".safetensors") for f in files):
            raise HieraError(
                f"{Path(folder) / pickles[0]}: pickle weights (loading them can run arbitrary code) and no "
                f".safetensors beside them; hiera loads safetensors only — convert the model, or pass "
                f"--trust-pickle (or set {TRUST_ENV}=1) if you trust its source"
            )


# -- where models run --------------------------------------------------------------------------------------
DEVICES = ("auto", "cpu", "cuda")


def cuda_available() -> bool:
    """Whether torch sees a CUDA device.

    On Linux without NVIDIA's driver there can be none, and importing torch to
    hear so cost a cold search about 2 s: it is asked only where a driver is
    (``/dev/dxg``: WSL 2, whose GPUs have no ``/dev/nvidia*``).
    """
    if "torch" not in sys.modules and sys.platform.startswith("linux") and not any(
        os.path.exists(p) for p in ("/proc/driver/nvidia/version", "/dev/nvidiactl", "/dev/nvidia0", "/dev/dxg")
    ):
        return False
    import torch

    return bool(torch.cuda.is_available())


def resolve_device(name: str | None, what: str = "--device") -> str:
    """``cpu`` or ``cuda``: ``auto`` (and None) is ``cuda`` when torch sees a GPU, else ``cpu``; a bad name is one line.

    One meaning for every command and API that runs a model: ``auto`` never
    changes anything on a machine without a GPU, where hiera keeps its CPU
    path (and its CPU backends, :mod:`hiera.backends`).
    """
    key = "auto" if name is None else str(name).strip().lower()
    if key not in DEVICES:
        raise BadInputError(f"{what}: unknown device {name!r}; choose one of: {', '.join(DEVICES)}")
    if key == "auto":
        return "cuda" if cuda_available() else "cpu"
    if key == "cuda" and not cuda_available():
        raise BadInputError(f"{what} cuda: torch sees no CUDA device here; use auto or cpu")
    return key


def autocast_dtype(device: str) -> str | None:
    """The mixed-precision type training uses on ``device``: bfloat16 where the GPU has it, else float16; None on a CPU.

    bfloat16 keeps float32's range, so no loss scaling is needed; older GPUs
    (before Ampere) get float16 with a gradient scaler (transformers' ``fp16``).
    """
    if device != "cuda":
        return None
    import torch

    return "bfloat16" if torch.cuda.is_bf16_supported() else "float16"


def peak_memory(device: str) -> dict[str, float | str]:
    """What a training report records of memory: the GPU's peak allocation on CUDA, else the process's peak RSS."""
    import resource

    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # Linux reports KiB
    out: dict[str, float | str] = {"peak_rss_mb": round(rss, 1)}
    if device == "cuda":
        import torch

        out["peak_gpu_mb"] = round(torch.cuda.max_memory_allocated() / 2**20, 1)
        out["gpu"] = torch.cuda.get_device_name()
    return out
