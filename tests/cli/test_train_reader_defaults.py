"""``hiera train-reader``'s recipe follows the device: the arguments it hands the trainer on cpu, cuda and auto.

No GPU is needed: the device check is told a GPU is there and the trainer
records the arguments it was given, so each case checks what the command
line resolves to, not what a dataclass says.
"""

from __future__ import annotations

from dataclasses import asdict, fields
from pathlib import Path
from typing import Any

import pytest

from hiera.cli import main
from hiera.train.args import ReaderArgs

# the fields the GPU recipe changes (bench.reader_grid's choice); the rest must not depend on the device
DEVICE_FIELDS = {"batch_size", "learning_rate", "epochs", "freeze_embeddings"}


@pytest.fixture
def resolve(squad_tiny: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Run ``train-reader`` with extra options and a GPU visible or not; returns the ReaderArgs the trainer got."""
    root, qfile = squad_tiny
    seen: list[ReaderArgs] = []

    def record(index: Any, questions: Any, out: Any, args: ReaderArgs, log: Any = None) -> dict:
        seen.append(args)
        return {"examples": {}, "train": {}, "seconds_total": 0.0, "peak_rss_mb": 0.0}

    monkeypatch.setattr("hiera.train.reader.train_reader", record)

    def run(*extra: str, gpu: bool = True) -> ReaderArgs:
        monkeypatch.setattr("hiera.models.cuda_available", lambda: gpu)
        rc = main(["train-reader", str(root), "--questions", str(qfile), "--format", "squad",
                   "--out", str(tmp_path / "rd"), "-q", *extra])
        assert rc == 0
        return seen[-1]

    return run


def test_cuda_trains_the_gpu_recipe_and_cpu_keeps_its_own(resolve, capsys) -> None:
    cpu, cuda = resolve("--device", "cpu"), resolve("--device", "cuda")
    assert (cpu.batch_size, cpu.learning_rate, cpu.epochs, cpu.freeze_embeddings) == (16, 1e-4, 1.0, True)
    assert (cuda.batch_size, cuda.learning_rate, cuda.epochs, cuda.freeze_embeddings) == (64, 4e-4, 3.0, False)
    assert cpu.device == "cpu" and cuda.device == "cuda"
    a, b = asdict(cpu), asdict(cuda)
    differ = {f.name for f in fields(ReaderArgs) if a[f.name] != b[f.name]}
    assert differ == DEVICE_FIELDS | {"device"}
    assert cpu == ReaderArgs(device="cpu", progress=False)  # the CPU recipe is the dataclass's: the Python API's default
    # the help names the values each device really gets
    with pytest.raises(SystemExit):
        main(["train-reader", "--help"])
    helptext = " ".join(capsys.readouterr().out.split())
    for args in (cpu, cuda):
        lr = f"{args.learning_rate:.0e}".replace("e-0", "e-")
        assert f"batches of {args.batch_size}" in helptext and f"{args.epochs:g} epoch" in helptext
        assert f"lr {lr}" in helptext


def test_auto_takes_the_recipe_of_the_device_it_finds(resolve) -> None:
    with_gpu, without = resolve("--device", "auto", gpu=True), resolve("--device", "auto", gpu=False)
    assert (with_gpu.batch_size, with_gpu.learning_rate, with_gpu.freeze_embeddings) == (64, 4e-4, False)
    assert (without.batch_size, without.learning_rate, without.freeze_embeddings) == (16, 1e-4, True)
    assert with_gpu.device == without.device == "auto"  # resolved again where it trains


def test_options_given_win_over_the_device_recipe(resolve) -> None:
    cuda = resolve("--device", "cuda", "--batch-size", "8", "--lr", "2e-5", "--epochs", "1", "--no-train-embeddings")
    assert (cuda.batch_size, cuda.learning_rate, cuda.epochs, cuda.freeze_embeddings) == (8, 2e-5, 1.0, True)
    cpu = resolve("--device", "cpu", "--train-embeddings", "--max-steps", "5")
    assert cpu.freeze_embeddings is False and cpu.max_steps == 5 and cpu.batch_size == 16
