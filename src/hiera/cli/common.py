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
