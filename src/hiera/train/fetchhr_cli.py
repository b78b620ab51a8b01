"""The ``hiera train-fetchhr`` sub-command (registered by :func:`hiera.train.cli.register`)."""

from __future__ import annotations

import argparse
import json
from typing import Any


def cmd_train_fetchhr(args: argparse.Namespace) -> int:
    from hiera.train.cli import _common_fields, _log, _questions
    from hiera.train.fetchhr import FetchHRArgs, train_fetchhr

    fargs = FetchHRArgs(
        layers=args.layers,
        warmup_ratio=args.warmup_ratio,
        hard_negatives=args.hard_negatives,
        dropout=args.dropout,
        **_common_fields(args),
    )
    report = train_fetchhr(args.index, _questions(args), args.out, fargs, log=_log if not args.quiet else (lambda m: None))
    print(json.dumps({k: report[k] for k in ("layers", "steps", "loss_first", "loss_last", "train_seconds",
                                              "stopped_by_budget", "peak_rss_mb")} | {"model": args.out}, indent=2))
    return 0


def register(add: Any, common: Any, fmts: str) -> None:
    """Add ``train-fetchhr``; ``common`` adds the options every training sub-command shares."""
    sp = add("train-fetchhr", cmd_train_fetchhr,
             "train FetchHR's per-layer retrieval heads over a frozen query encoder and passage index")
    common(sp, fmts)
    sp.set_defaults(base_model=None, batch_size=64)
    sp.add_argument("--layers", default=None, help="layers that get a head, like 1-6 or 1,3,6 (default: all)")
    sp.add_argument("--hard-negatives", type=int, default=0, help="BM25 hard negatives per question (0: in-batch only)")
    sp.add_argument("--warmup-ratio", type=float, default=0.1)
    sp.add_argument("--dropout", type=float, default=0.1)
    sp.add_argument("--save-steps", type=int, default=100)
