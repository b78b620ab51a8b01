"""Retrievers: one protocol (``search``/``batch_search``), many methods.

``get_retriever(name, collection, **params)`` builds one by name from the
registry in :mod:`hiera.spec` (the single source of names, levels and
parameters for the CLI, the API, the page and the evaluator).
"""

from __future__ import annotations

from os import PathLike
from typing import Any

from hiera.errors import BadInputError
from hiera.results import Hit, Results, StageScore, TraceStep
from hiera.retrieve.protocol import Retriever
from hiera.spec import Level, method, method_names

RETRIEVERS = method_names()


def get_retriever(name: str, collection: Any, **defaults: Any) -> Retriever:
    """The retriever ``name`` over an opened ``collection`` (:func:`hiera.open_collection`)."""
    if isinstance(collection, str | bytes | PathLike):
        raise BadInputError(f"get_retriever takes an opened collection, not the path {collection!r}: "
                            "pass hiera.open_collection(path)")
    if not hasattr(collection, "store"):
        raise BadInputError(f"get_retriever takes an opened collection (hiera.open_collection(path)), not "
                            f"{type(collection).__name__}")
    return method(name).load()(collection, **defaults)


__all__ = ["RETRIEVERS", "Hit", "Level", "Results", "Retriever", "StageScore", "TraceStep", "get_retriever"]
