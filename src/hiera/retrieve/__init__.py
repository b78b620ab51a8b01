"""Retrievers: one protocol (``search``/``batch_search``), many methods.

``get_retriever(name, collection, **params)`` builds one by name from the
registry in :mod:`hiera.spec` (the single source of names, levels and
parameters for the CLI, the API, the page and the evaluator).
"""

from __future__ import annotations

from typing import Any

from hiera.results import Hit, Results, StageScore, TraceStep
from hiera.retrieve.protocol import Retriever
from hiera.spec import Level, method, method_names

RETRIEVERS = method_names()


def get_retriever(name: str, collection: Any, **defaults: Any) -> Retriever:
    return method(name).load()(collection, **defaults)


__all__ = ["RETRIEVERS", "Hit", "Level", "Results", "Retriever", "StageScore", "TraceStep", "get_retriever"]
