"""``hiera serve DIR``: the search API and web page for one collection.

Registered into the main parser through :func:`register` so that ``hiera``
does not import FastAPI or uvicorn unless this command runs.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Callable
from pathlib import Path


def cmd_serve(args: argparse.Namespace) -> int:
    """Open the collection (errors surface before the port is taken), then run uvicorn."""
    import uvicorn

    from hiera.serve.api import create_app

    logging.basicConfig(
        level=logging.WARNING if args.quiet else logging.INFO,
        format="%(asctime)s %(name)s %(levelname)s %(message)s",
    )
    app = create_app(
        Path(args.index),
        warmup=not args.no_warmup,
        reranker=Path(args.rerank) if args.rerank else None,
        rerank_depth=args.rerank_depth,
        vectors=args.vectors,
    )
    host = f"[{args.host}]" if ":" in args.host else args.host
    url = f"http://{host}:{args.port}/"
    print(f"hiera: serving {args.index} at {url} (API docs at {url}docs); Ctrl-C stops", file=sys.stderr, flush=True)
    # uvicorn's access log would repeat the per-request line hiera.serve logs with timings.
    uvicorn.run(app, host=args.host, port=args.port, access_log=False, log_level="warning" if args.quiet else "info")
    return 0


def register(add: Callable[..., argparse.ArgumentParser]) -> None:
    sp = add("serve", cmd_serve, "serve a collection over HTTP: JSON search API and a web page")
    sp.add_argument("index", metavar="DIR", help="collection directory (built with `hiera build`)")
    sp.add_argument("--host", default="127.0.0.1", help="interface to listen on (default 127.0.0.1: this machine only)")
    sp.add_argument("--port", type=int, default=8000)
    sp.add_argument("--no-warmup", action="store_true", help="start at once; the first searches load the indexes")
    sp.add_argument("--rerank", default=None, help="cross-encoder directory: enables /search?rerank=true")
    sp.add_argument("--rerank-depth", type=int, default=20, help="hits the reranker rescores")
    sp.add_argument("--vectors", choices=["float16", "float32"], default="float16", help="float32 keeps the vector matrices upcast in memory (2x their size, faster dense scoring); float16 memory-maps them")
