"""What every ``hiera`` sub-command module shares: printing, logging, the ``add`` callback's type."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from typing import Any, Protocol

Handler = Callable[[argparse.Namespace], int]


class AddCommand(Protocol):
    """``add(name, handler, help)`` → the sub-command's parser (with ``--quiet`` and, for model commands,
    ``--trust-pickle`` already on it): what :func:`hiera.cli.main.build_parser` gives each module's ``register``."""

    def __call__(self, name: str, handler: Handler, help_: str) -> argparse.ArgumentParser: ...


def print_json(obj: Any) -> None:
    print(json.dumps(obj, indent=2, ensure_ascii=False))


def log(msg: str) -> None:
    """Progress and reports go to stderr; stdout carries only results (JSON stays parseable)."""
    print(msg, file=sys.stderr)


def log_unless(quiet: bool) -> Callable[[str], None]:
    return (lambda m: None) if quiet else log


def add_device_option(sp: argparse.ArgumentParser, search: bool = False) -> None:
    """``--device``: one meaning everywhere a model or an index runs (commands that search also take ``faiss``).

    ``auto`` (the default) is ``cuda`` when torch sees a GPU, else the CPU
    path as it was (FAISS indexes, the CPU encoder backends); nothing changes
    on a machine without a GPU.
    """
    if search:
        sp.add_argument("--device", default="auto", choices=["auto", "faiss", "cpu", "cuda"],
                        help="where models run and dense indexes are searched: cuda (models in float16, exact search "
                             "and DHR's passage stage on the GPU), cpu (exact search with torch), faiss (the FAISS "
                             "indexes as built, models on the CPU); auto: cuda when there is a GPU, else faiss")
    else:
        sp.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"],
                        help="where the models run: cuda (float16 inference, mixed-precision training), cpu; "
                             "auto: cuda when torch sees a GPU, else cpu")
