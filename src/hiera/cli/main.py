"""The ``hiera`` command line: one sub-command module per subsystem, each registering its own commands.

Errors a user can cause print one line (``hiera: error: …``) and exit 2; pass
``--debug`` (or set ``HIERA_DEBUG=1``) to see the traceback instead.

Every module in this package imports what its commands need inside the
handlers, so ``hiera --help`` or ``hiera sets parse`` never loads FAISS,
torch or FastAPI.
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import sys
from collections.abc import Sequence

from hiera.cli import answer, build, check, corpus, demo, eval, mcp, search, serve, sets, train
from hiera.cli.common import Handler
from hiera.errors import HieraError

# Sub-commands that load encoder or cross-encoder weights (they take --trust-pickle).
MODEL_COMMANDS = frozenset({
    "build", "search", "add", "eval", "tune", "serve", "train", "train-reranker", "train-classifier",
    "train-reader", "tune-reader", "answer", "sets", "demo", "mcp",
})
# In the order `hiera --help` lists them.
COMMAND_MODULES = (corpus, build, search, eval, train, serve, mcp, demo, sets, check, answer)


def build_parser() -> argparse.ArgumentParser:
    from hiera.version import __version__

    p = argparse.ArgumentParser(prog="hiera", description="Hierarchical retrieval for open-domain QA.")
    p.add_argument("--version", action="version", version=f"hiera {__version__}")
    p.add_argument("--debug", action="store_true", help="show tracebacks")
    sub = p.add_subparsers(dest="command", required=True)

    def add(name: str, handler: Handler, help_: str) -> argparse.ArgumentParser:
        sp = sub.add_parser(name, help=help_, description=help_)
        sp.set_defaults(handler=handler)
        sp.add_argument("--quiet", "-q", action="store_true", help="no progress output")
        if name in MODEL_COMMANDS:
            sp.add_argument(
                "--trust-pickle", action="store_true",
                help="also load pickle model weights (*.bin, *.pt), which can run code: only for models you trust "
                "(default: safetensors only; env HIERA_TRUST_PICKLE=1)",
            )
        return sp

    for module in COMMAND_MODULES:
        module.register(add)
    return p


INTERRUPTED = ("hiera: interrupted (what was done is kept: encodings in the embedding cache, a training's "
               "checkpoints in OUT.work; rerun the command to resume)")


def main(argv: Sequence[str] | None = None) -> int:
    try:
        return _main(argv)
    except KeyboardInterrupt:  # also while the parser is built or a handler imports torch
        print(INTERRUPTED, file=sys.stderr)
        return 130


def _main(argv: Sequence[str] | None) -> int:
    from hiera.models import passive_threads

    passive_threads()  # before torch or FAISS loads (lazily, in the handlers)
    argv = sys.argv[1:] if argv is None else list(argv)
    early = search.start_early(argv)  # a cold `search -r linking`: spaCy's process starts before the parser is built
    parser = build_parser()
    args = parser.parse_args(argv)
    if early is not None:
        if args.handler is search.cmd_search:
            args.early_spacy = early  # cmd_search uses it (or stops it) and closes it
        else:
            early.close()
    debug = args.debug or os.environ.get("HIERA_DEBUG") == "1"
    if getattr(args, "trust_pickle", False):
        from hiera.models import TRUST_ENV

        os.environ[TRUST_ENV] = "1"  # every model load of this run (Encoder, Reranker, trainers) reads it
    try:
        rc = args.handler(args)
        sys.stdout.flush()  # inside the try: a reader gone before the last buffered line is caught below too
        return rc
    except HieraError as e:
        if debug:
            raise
        print(f"hiera: error: {e}", file=sys.stderr)
        return 2
    except sqlite3.DatabaseError as e:  # a damaged corpus store or embedding cache: say so, in one line
        if debug:
            raise
        print(f"hiera: error: a SQLite database is damaged or unreadable ({e}); run `hiera check DIR`", file=sys.stderr)
        return 2
    except BrokenPipeError:
        return _reader_gone()


def _reader_gone() -> int:
    """The command reading our output stopped (``| head``): end quietly, as grep does, with the status a shell
    gives a process killed by SIGPIPE. Standard output is pointed at /dev/null first, so the interpreter's last
    flush of what is still buffered does not raise again on the way out."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):  # stdout replaced by an object without a file descriptor
        pass
    return 141


if __name__ == "__main__":
    sys.exit(main())
