"""A tiny real SQuAD collection (BM25 only) and a reader trained on it for a few steps, once per session."""

from __future__ import annotations

from pathlib import Path

import pytest
from readdata import RULES, tiny_squad

from hiera.eval.questions import load_squad


@pytest.fixture(scope="session")
def squad_tiny(data_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(collection root, questions file): ingested and BM25-built."""
    from hiera.corpus.ingest import ingest
    from hiera.index.build import BuildOptions, build

    tmp = tmp_path_factory.mktemp("squad-tiny")
    qfile = tiny_squad(data_dir, tmp / "squad.json")
    root = tmp / "col"
    ingest([qfile], "squad", root, rules=RULES, progress=False)
    build(root, BuildOptions(dense=False, progress=False), log=lambda m: None)
    return root, qfile


@pytest.fixture(scope="session")
def tiny_reader(squad_tiny: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A reader trained long enough to memorize its dozen training questions."""
    from hiera.train.args import ReaderArgs
    from hiera.train.reader import train_reader

    root, qfile = squad_tiny
    out = tmp_path_factory.mktemp("reader") / "rd"
    args = ReaderArgs(max_steps=30, batch_size=4, learning_rate=5e-4, max_length=96, stride=32, warmup_ratio=0.0,
                      save_steps=1000, progress=False, seed=3)
    train_reader(root, load_squad(qfile, rules=RULES), out, args, log=lambda m: None)
    return out
