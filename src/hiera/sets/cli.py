"""``hiera sets ...``: set-query (QUEST) tools.

``hiera sets parse "QUERY" [--json] [--parser rules|rules+spacy]`` prints the
query's set expression: its QUEST template, its atomic constraints and the
expression tree (``--json``: one object with ``template``, ``constraints``,
``expression``, ``notes``, ``query``, ``parser`` and ``fallback``).

Registered into the main parser through :func:`register`; nothing heavier
than the rule-based parser is imported unless asked for.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable

from hiera.errors import BadInputError


def cmd_sets_parse(args: argparse.Namespace) -> int:
    from hiera.sets.expr import to_infix
    from hiera.sets.parser import get_parser

    result = get_parser(args.parser).parse(args.query)
    if args.json:
        print(json.dumps(result.to_json(), ensure_ascii=False))
        return 0
    print(f"template: {result.template}")
    print("constraints:")
    for n, c in enumerate(result.constraints, 1):
        print(f"  {n}. {c}")
    print(f"expression: {to_infix(result.expression)}")
    for note in result.notes:
        print(f"note: {note}")
    return 0


SUBCOMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {"parse": cmd_sets_parse}


def cmd_sets(args: argparse.Namespace) -> int:
    """Dispatch to the ``sets`` sub-command named on the command line."""
    handler = SUBCOMMANDS.get(getattr(args, "sets_command", None) or "")
    if handler is None:
        raise BadInputError(f"hiera sets: choose a sub-command: {', '.join(sorted(SUBCOMMANDS))}")
    return handler(args)


def register(add: Callable[..., argparse.ArgumentParser]) -> None:
    from hiera.sets.parser import PARSERS

    sp = add("sets", cmd_sets, "set queries (QUEST): parse a query into intersections, unions and differences")
    sub = sp.add_subparsers(dest="sets_command", required=True, metavar="COMMAND")
    p = sub.add_parser(
        "parse",
        help="print a query's set expression and QUEST template",
        description="Parse a set query into atomic constraints joined by intersection, union and difference.",
    )
    p.add_argument("query", metavar="QUERY")
    p.add_argument("--json", action="store_true", help="one JSON object: template, constraints, expression, notes")
    p.add_argument(
        "--parser",
        default="rules",
        choices=sorted(PARSERS),
        help="rules (word lists; default) or rules+spacy (spaCy's tags; needs spaCy and an English model)",
    )
    p.set_defaults(handler=cmd_sets)
