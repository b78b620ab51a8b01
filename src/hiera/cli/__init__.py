"""The ``hiera`` command line (:mod:`hiera.cli.main`), one module per subsystem's sub-commands."""

from hiera.cli.main import build_parser, main

__all__ = ["build_parser", "main"]
