"""HTTP serving: a JSON search API and a single-page web UI over one collection.

``create_app(root)`` builds the FastAPI application; ``hiera serve DIR`` runs
it with uvicorn. The collection and every retriever are opened once per
process, so a request only pays for its own search.

``api`` (the app and its routes) stands on ``service`` (the collection and its
retrievers), ``params`` (query parameters from the registry), ``guard`` (the
limits, the API key and body limit) and ``pool`` (searches with a deadline);
none of them imports ``api``. ``ray`` serves a sharded build with Ray Serve
behind the same app; ``cli`` is the command.

``create_app`` is imported lazily: every ``hiera`` command imports
``hiera.cli.serve`` to register ``serve``, and none but ``serve`` should pay
for importing FastAPI.
"""

from __future__ import annotations

from typing import Any

__all__ = ["create_app"]


def __getattr__(name: str) -> Any:
    if name == "create_app":
        from hiera.serve.api import create_app

        return create_app
    raise AttributeError(f"module 'hiera.serve' has no attribute {name!r}")
