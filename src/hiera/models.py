"""Loading Hugging Face models the way hiera needs them: offline, and without library chatter.

Encoders, rerankers and trainers all load local model directories; none of
them may reach for the network (hiera never downloads weights), and a load
must not change how ``transformers`` logs for the rest of the process.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager


def offline() -> None:
    """Keep the Hugging Face libraries off the network; an explicit setting in the environment wins."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
    os.environ.setdefault("WANDB_DISABLED", "true")


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
