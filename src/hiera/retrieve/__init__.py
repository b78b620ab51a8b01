"""Retrievers: one protocol (``search``/``batch_search``), many methods.

``get_retriever(name, collection)`` builds one by name; ``RETRIEVERS`` lists
the names (the CLI, the API and the evaluator use it as the single source).
"""

from __future__ import annotations

from typing import Any

from hiera.errors import BadInputError
from hiera.retrieve.protocol import Hit, Level, Results, Retriever, StageScore, TraceStep


def _classes() -> dict[str, type]:
    from hiera.retrieve.bm25 import Bm25DocRetriever, Bm25Retriever
    from hiera.retrieve.dense import DenseRetriever
    from hiera.retrieve.dhr import Bm25DhrRetriever, DhrParallelRetriever, DhrRetriever
    from hiera.retrieve.hybrid import HybridRetriever

    classes = (
        Bm25Retriever,
        Bm25DocRetriever,
        DenseRetriever,
        DhrRetriever,
        DhrParallelRetriever,
        HybridRetriever,
        Bm25DhrRetriever,
    )
    return {c.name: c for c in classes}


RETRIEVERS = ("bm25", "bm25-doc", "dense", "dhr", "dhr-parallel", "hybrid", "bm25-dhr")


def get_retriever(name: str, collection: Any, **defaults: Any) -> Retriever:
    classes = _classes()
    if name not in classes:
        raise BadInputError(f"unknown retriever {name!r}; valid: {', '.join(RETRIEVERS)}")
    return classes[name](collection, **defaults)


__all__ = ["RETRIEVERS", "Hit", "Level", "Results", "Retriever", "StageScore", "TraceStep", "get_retriever"]
