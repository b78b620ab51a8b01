"""``hiera mcp COLL [--http HOST:PORT]``: a collection (or a hiera server) as an MCP server (:mod:`hiera.integrations.mcp`)."""

from __future__ import annotations

import argparse

from hiera.cli.common import AddCommand
from hiera.errors import HieraError


def cmd_mcp(args: argparse.Namespace) -> int:
    try:
        from hiera.integrations import mcp
    except ImportError as e:
        raise HieraError(str(e)) from None
    from hiera.integrations.source import open_source

    if args.http:
        mcp.parse_address(args.http)  # a bad address fails before the collection is opened
    if args.collection.startswith(("http://", "https://")):
        from hiera.client import HieraClient

        if args.reader:
            raise HieraError("--reader: a server's reader is chosen when it starts (hiera serve --reader DIR)")
        source = open_source(HieraClient(args.collection, api_key=args.api_key, timeout=args.timeout))
    else:
        source = open_source(args.collection, reader=args.reader)
    if args.http:
        mcp.run_http(source, args.http)
    else:
        mcp.run_stdio(source)
    return 0


def register(add: AddCommand) -> None:
    sp = add("mcp", cmd_mcp, "serve a collection to LLM agents over the Model Context Protocol (stdio or HTTP)")
    sp.add_argument("collection", help="collection directory, or the URL of a hiera serve (http://HOST:PORT)")
    sp.add_argument("--http", default=None, metavar="HOST:PORT",
                    help="serve streamable HTTP at http://HOST:PORT/mcp instead of stdio")
    sp.add_argument("--reader", default=None,
                    help="reader directory (hiera train-reader): adds the answer tool (local collections)")
    sp.add_argument("--api-key", default=None, help="the server's API key, for a URL (default: $HIERA_API_KEY)")
    sp.add_argument("--timeout", type=float, default=60.0, help="seconds to wait for the server, for a URL")
