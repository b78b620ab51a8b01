"""``hiera demo``: a Wikipedia collection from PyPI data, and DHR answering example questions (:mod:`hiera.demo`)."""

from __future__ import annotations

import argparse
from pathlib import Path

from hiera.cli.common import AddCommand
from hiera.demo import DEFAULT_DIR, QUESTIONS, run_demo


def cmd_demo(args: argparse.Namespace) -> int:
    questions = args.question or QUESTIONS
    backend = None
    if args.backend is not None:
        from hiera.backends import check_backend, require

        backend = check_backend(args.backend)
        require(backend)
    run_demo(Path(args.dir), questions, k=args.k, rebuild=args.rebuild, backend=backend)
    return 0


def register(add: AddCommand) -> None:
    sp = add("demo", cmd_demo, "build a Wikipedia collection from PyPI data and answer example questions with DHR")
    sp.add_argument("--dir", default=str(DEFAULT_DIR), help=f"collection directory (default {DEFAULT_DIR})")
    sp.add_argument("--question", action="append", help="ask this instead of the built-in examples (repeatable)")
    sp.add_argument("--k", type=int, default=3)
    sp.add_argument("--rebuild", action="store_true", help="re-ingest and rebuild")
    sp.add_argument("--backend", default=None,
                    help="encoder backend of the build (default: hiera build's, auto; see hiera build --backend)")
