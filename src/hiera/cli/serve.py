"""``hiera serve DIR``: the search API and web page for one collection.

Registered into the main parser through :func:`register` so that ``hiera``
does not import FastAPI or uvicorn unless this command runs.

Exposure: the server binds 127.0.0.1 unless ``--host`` says otherwise, and
warns (a log line and a line on stderr) when it listens on any other address
without an API key. The key comes from ``--api-key`` or, better (a command
line is visible to every user of the machine), ``HIERA_API_KEY``. SIGTERM
(or Ctrl-C) stops accepting connections and lets in-flight requests finish,
for at most ``--search-timeout`` + 5 seconds.
"""

from __future__ import annotations

import argparse
import ipaddress
import logging
import os
import sys
from pathlib import Path

from hiera.cli.common import AddCommand, add_device_option

log = logging.getLogger("hiera.serve")


def is_loopback(host: str) -> bool:
    """``localhost`` and 127.0.0.0/8 / ::1; a name other than localhost may resolve anywhere, so it is not."""
    if host.strip().lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def exposure_warning(host: str, api_key: str | None) -> str | None:
    """The warning for a server reachable beyond this machine with no API key, else None."""
    if is_loopback(host) or api_key:
        return None
    return (
        f"serving on {host} without an API key: anyone who can reach this port can search and read the "
        "whole collection; set HIERA_API_KEY (or pass --api-key), or bind 127.0.0.1"
    )


def cmd_serve(args: argparse.Namespace) -> int:
    """Open the collection (errors surface before the port is taken), then run uvicorn."""
    import uvicorn

    from hiera.serve.api import create_app
    from hiera.serve.guard import API_KEY_ENV

    logging.basicConfig(
        level=logging.WARNING if args.quiet else logging.INFO,
        format="%(asctime)s %(name)s %(levelname)s %(message)s",
    )
    api_key = args.api_key if args.api_key is not None else os.environ.get(API_KEY_ENV, "")
    warning = exposure_warning(args.host, api_key)
    if warning:
        log.warning(warning)
        print(f"hiera: warning: {warning}", file=sys.stderr, flush=True)
    if args.engine == "ray":
        from hiera.serve.ray import serve_forever

        return serve_forever(
            Path(args.index), args.ray_address, host=args.host, port=args.port, replicas=args.replicas,
            shard_cpus=args.shard_cpus, shard_timeout=args.shard_timeout, vectors=args.vectors, warmup=not args.no_warmup,
            app_options={"reranker": Path(args.rerank) if args.rerank else None, "rerank_depth": args.rerank_depth,
                         "reader": Path(args.reader) if args.reader else None,
                         "api_key": api_key, "cors_origin": args.cors_origin, "search_timeout": args.search_timeout,
                         "max_body": args.max_body},
        )
    app = create_app(
        Path(args.index),
        warmup=not args.no_warmup,
        reranker=Path(args.rerank) if args.rerank else None,
        rerank_depth=args.rerank_depth,
        reader=Path(args.reader) if args.reader else None,
        vectors=args.vectors,
        device=args.device,
        dense_search=args.dense_search,
        api_key=api_key,
        cors_origin=args.cors_origin,
        search_timeout=args.search_timeout,
        max_body=args.max_body,
    )
    host = f"[{args.host}]" if ":" in args.host else args.host
    url = f"http://{host}:{args.port}/"
    key_note = "; API key required" if api_key else ""
    print(f"hiera: serving {args.index} at {url} (API docs at {url}docs{key_note}); Ctrl-C stops", file=sys.stderr, flush=True)
    # uvicorn's access log would repeat the per-request line hiera.serve logs with timings.
    # On SIGTERM uvicorn stops accepting and lets in-flight requests finish (bounded here).
    uvicorn.run(
        app, host=args.host, port=args.port, access_log=False, log_level="warning" if args.quiet else "info",
        timeout_graceful_shutdown=int(args.search_timeout) + 5,
    )
    return 0


def register(add: AddCommand) -> None:
    # from guard, not api: every hiera command registers serve, and only serve should import FastAPI
    from hiera.serve.guard import MAX_BODY_BYTES, SEARCH_TIMEOUT_S, SHARD_TIMEOUT_S

    sp = add("serve", cmd_serve, "serve a collection over HTTP: JSON search API and a web page")
    sp.add_argument("index", metavar="DIR", help="collection directory (built with `hiera build`)")
    sp.add_argument("--host", default="127.0.0.1", help="interface to listen on (default 127.0.0.1: this machine only)")
    sp.add_argument("--port", type=int, default=8000)
    sp.add_argument("--no-warmup", action="store_true", help="start at once; the first searches load the indexes")
    sp.add_argument("--rerank", default=None, help="cross-encoder directory: enables /search?rerank=true")
    sp.add_argument("--rerank-depth", type=int, default=20, help="hits the reranker rescores")
    sp.add_argument("--reader", default=None, help="reader directory (hiera train-reader): enables /answer and the page's answer mode")
    sp.add_argument("--vectors", choices=["float16", "float32"], default="float16", help="float32 keeps the vector matrices upcast in memory (2x their size, faster dense scoring); float16 memory-maps them")
    sp.add_argument("--api-key", default=None, help="require this key on every API request (Authorization: Bearer KEY "
                    "or X-API-Key); default: $HIERA_API_KEY, which keeps it out of the process list")
    sp.add_argument("--cors-origin", default=None, metavar="ORIGIN",
                    help="let pages from this one origin (e.g. https://app.example.org) call the API; default: none")
    sp.add_argument("--search-timeout", type=float, default=SEARCH_TIMEOUT_S,
                    help=f"seconds a search may take before it is answered 504 (default {SEARCH_TIMEOUT_S:g})")
    sp.add_argument("--max-body", type=int, default=MAX_BODY_BYTES, help="largest request body accepted, in bytes (413 beyond)")
    sp.add_argument("--engine", choices=["local", "ray"], default="local",
                    help="ray: Ray Serve, a router plus one deployment per shard of a sharded build (same API); "
                    "local: one process (a sharded build is searched with one thread per shard)")
    sp.add_argument("--ray-address", default=None, metavar="auto|ADDRESS", help="--engine ray: the cluster (default: a local Ray)")
    sp.add_argument("--replicas", type=int, default=1, help="--engine ray: replicas of each shard deployment")
    sp.add_argument("--shard-cpus", type=float, default=1.0, help="--engine ray: CPUs reserved per shard replica")
    add_device_option(sp, search=True)
    sp.add_argument("--shard-timeout", type=float, default=SHARD_TIMEOUT_S,
                    help="--engine ray: seconds a search waits for a shard before answering 503 (or leaving the shard "
                         "out when the request says partial=true)")
