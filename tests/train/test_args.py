"""The trainers' arguments as the Hugging Face trainers receive them."""

from __future__ import annotations

from pathlib import Path

import pytest

from hiera.errors import BadInputError
from hiera.train import biencoder, reranker
from hiera.train.args import RerankerArgs, TrainArgs


@pytest.mark.parametrize(
    ("build", "args"),
    [(biencoder.training_arguments, TrainArgs), (reranker.training_arguments, RerankerArgs)],
    ids=["biencoder", "reranker"],
)
def test_warmup_is_a_fraction_of_the_run(build, args, tmp_path: Path) -> None:
    targs = build(args(warmup_ratio=0.1, max_steps=50, progress=False), tmp_path)
    assert targs.get_warmup_steps(50) == 5 and targs.get_warmup_steps(400) == 40
    assert build(args(warmup_ratio=0.0), tmp_path).get_warmup_steps(400) == 0
    assert targs.max_steps == 50 and targs.output_dir == str(tmp_path)


def test_biencoder_batches_never_repeat_a_text(tmp_path: Path) -> None:
    assert biencoder.training_arguments(TrainArgs(), tmp_path).batch_sampler == "no_duplicates"


@pytest.mark.parametrize("ratio", [-0.1, 1.0, 5])
def test_warmup_ratio_outside_0_1_is_refused(ratio: float) -> None:
    # from 1 up transformers would read it as a number of steps
    for args in (TrainArgs(warmup_ratio=ratio), RerankerArgs(warmup_ratio=ratio)):
        with pytest.raises(BadInputError, match="warmup_ratio"):
            args.check()
