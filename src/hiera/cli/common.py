"""What every ``hiera`` sub-command module shares: printing, logging, the ``add`` callback's type."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from typing import Any, Protocol, TypeVar

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


def _device(name: str) -> str:
    """``--device``'s type: the model devices, and a one-line hint for a dense-search mode given as a device."""
    key = name.strip().lower()
    if key == "faiss":
        raise argparse.ArgumentTypeError(
            "'faiss' is not a device: models run on --device auto|cpu|cuda, and the FAISS indexes as built are "
            "--dense-search faiss (e.g. --device cpu --dense-search faiss)")
    if key not in ("auto", "cpu", "cuda"):
        raise argparse.ArgumentTypeError(f"invalid device {name!r} (choose from auto, cpu, cuda)")
    return key


def add_device_option(sp: argparse.ArgumentParser, search: bool = False) -> None:
    """``--device`` (where models run) everywhere a model runs; commands that search also take ``--dense-search``.

    ``auto`` (the default) is ``cuda`` when torch sees a GPU, else the CPU
    path as it was (FAISS indexes, the CPU encoder backends); nothing changes
    on a machine without a GPU.
    """
    if search:
        sp.add_argument("--device", default="auto", type=_device, metavar="{auto,cpu,cuda}",
                        help="where models run (query encoders, reader, reranker) and exact scans with them: cuda "
                             "(float16 models on the GPU), cpu; auto: cuda when torch sees a GPU, else cpu")
        sp.add_argument("--dense-search", default="auto", choices=["auto", "faiss", "exact"],
                        help="how dense indexes are searched: faiss (the FAISS indexes as built, approximate where "
                             "they are), exact (every vector scanned with torch on --device, and DHR's passage stage "
                             "there); auto: exact on cuda, else faiss")
    else:
        sp.add_argument("--device", default="auto", type=_device, metavar="{auto,cpu,cuda}",
                        help="where the models run: cuda (float16 inference, mixed-precision training), cpu; "
                             "auto: cuda when torch sees a GPU, else cpu")


T = TypeVar("T")


def once_more_if_changed(run: Callable[[], T]) -> T:
    """``run()``, and once more when another process removed what it found while it ran: the second opens the
    build live by then, as ``hiera serve`` searches again (:class:`~hiera.errors.CollectionChangedError`)."""
    from hiera.errors import CollectionChangedError

    try:
        return run()
    except CollectionChangedError:
        return run()


def positive_int(text: str) -> int:
    """An option's type: a whole number of at least 1 (a count, a length, a budget)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {text}")
    return value


def positive_float(text: str) -> float:
    """An option's type: a finite number above 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"must be a number above 0, got {text}")
    return value
