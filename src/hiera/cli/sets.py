"""``hiera sets ...``: set-query (QUEST) tools.

``hiera sets parse "QUERY" [--json] [--explain] [--parser rules|rules+spacy|endpoint
[--parser-url URL]]`` prints the query's set expression: its QUEST template,
its atomic constraints and the expression tree; ``--explain`` adds which rule
made each operator, what it read and the atoms it made (``--json``: one object
with ``template``, ``constraints``, ``expression``, ``notes``, ``query``,
``parser``, ``fallback`` and ``rules``, the explanation).

``hiera sets tune COLL --questions FILE --format quest --classifier DIR
[--set candidates=N] [--set decompose=false] [--dry-run]`` runs the ``sets``
method over validation queries and picks the classifier's thresholds for avg
F1 of the predicted sets, and whether blending in the documents' lead coverage of
each constraint helps (:mod:`hiera.sets.tune`; ``--set lexical_weight=W`` fixes it), saved in
``DIR/hiera-sets.json``.

Registered into the main parser through :func:`register`; nothing heavier
than the rule-based parser is imported unless asked for.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable

from hiera.cli.common import AddCommand
from hiera.errors import BadInputError

OP_SIGNS = {"and": "∩", "or": "∪", "diff": "\\"}


def cmd_sets_parse(args: argparse.Namespace) -> int:
    from hiera.sets.expr import to_infix
    from hiera.sets.parser import get_parser

    name = getattr(args, "parser", "rules")
    url = getattr(args, "parser_url", None)
    if url and name != "endpoint":
        raise BadInputError("--parser-url is for --parser endpoint")
    options = {"url": url, "timeout": getattr(args, "parser_timeout", 10.0)} if name == "endpoint" else {}
    result = get_parser(name, **options).parse(args.query)
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
    if getattr(args, "explain", False):
        print("how it was read:")
        if not result.rules:
            print("  no operator: " + ("the whole query is one constraint" if result.fallback else "one category"))
        for use in result.rules:
            data = use.to_json()
            atoms = ", ".join(f"[{a}]" for a in use.atoms)
            print(f"  {OP_SIGNS[use.op]} {use.rule}: {use.text!r} -> {atoms}")
            print(f"      {data['why']}")
    return 0


def cmd_sets_tune(args: argparse.Namespace) -> int:
    """Pick the classifier's thresholds for avg F1 on validation queries; save them beside it unless ``--dry-run``."""
    import sys

    from hiera.builds import open_collection
    from hiera.retrieve.sets import SetsRetriever
    from hiera.sets.classifier import write_thresholds
    from hiera.sets.queries import gold_ids, load_set_queries
    from hiera.sets.tune import LEXICAL_GRID, thresholds_from, tune_blend
    from hiera.spec import parse_assignments

    if args.format != "quest":
        raise BadInputError(f"hiera sets tune reads QUEST-format set queries (--format quest), not {args.format!r}")
    params = parse_assignments(args.set, ["sets"])["sets"]
    params.pop("threshold", None)
    fixed = params.pop("lexical_weight", None)
    params["classifier"] = args.classifier
    col = open_collection(args.index)
    queries = load_set_queries(args.questions, limit=args.limit, require_docs=True)
    r = SetsRetriever(col, **params)
    if not args.quiet:
        print(f"scoring {len(queries)} validation queries ...", file=sys.stderr)
    # the classifier's own probabilities (tune_blend blends each weight itself; a saved weight may be stale)
    plans = r.batch_plans([q.query for q in queries], lexical_weight=0.0)
    golds = [gold_ids(col.store, q)[0] for q in queries]
    res = tune_blend(plans, golds, weights=LEXICAL_GRID if fixed is None else (fixed,))
    meta = {"questions": str(args.questions), "n": len(queries), "candidates": r.defaults["candidates"],
            "parser": r.defaults["parser"], "collection": str(col.root)}
    saved = None
    if not args.dry_run:
        saved = str(write_thresholds(args.classifier, thresholds_from(res, args.classifier, meta)))
    res.pop("curve", None)
    print(json.dumps({**res, "saved": saved}, ensure_ascii=False))
    return 0


SUBCOMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {"parse": cmd_sets_parse, "tune": cmd_sets_tune}


def cmd_sets(args: argparse.Namespace) -> int:
    """Dispatch to the ``sets`` sub-command named on the command line."""
    handler = SUBCOMMANDS.get(getattr(args, "sets_command", None) or "")
    if handler is None:
        raise BadInputError(f"hiera sets: choose a sub-command: {', '.join(sorted(SUBCOMMANDS))}")
    return handler(args)


def register(add: AddCommand) -> None:
    from hiera.sets.parser import PARSERS

    sp = add("sets", cmd_sets, "set queries (QUEST): parse a query into intersections, unions and differences")
    sub = sp.add_subparsers(dest="sets_command", required=True, metavar="COMMAND")
    p = sub.add_parser(
        "parse",
        help="print a query's set expression and QUEST template",
        description="Parse a set query into atomic constraints joined by intersection, union and difference.",
    )
    p.add_argument("query", metavar="QUERY")
    p.add_argument("--json", action="store_true",
                   help="one JSON object: template, constraints, expression, notes, rules (the explanation)")
    p.add_argument("--explain", action="store_true", help="say which rule made each operator, and from which words")
    p.add_argument(
        "--parser",
        default="rules",
        choices=sorted(PARSERS),
        help="rules (word lists; default), rules+spacy (spaCy's tags; needs spaCy and an English model) or endpoint "
        "(a model behind an OpenAI-compatible chat-completions URL, --parser-url; falls back to the rules)",
    )
    p.add_argument("--parser-url", default=None, metavar="URL", help="--parser endpoint: the chat-completions URL")
    p.add_argument("--parser-timeout", type=float, default=10.0, metavar="S",
                   help="--parser endpoint: seconds to wait for it (default 10)")
    p.set_defaults(handler=cmd_sets)

    from hiera.spec import add_set_option

    t = sub.add_parser(
        "tune",
        help="choose the set classifier's thresholds for avg F1 on validation queries (saved beside it)",
        description="Run the sets method over validation queries once, then search the threshold(s) that maximize "
        "avg F1 of the predicted sets (QUEST's threshold search); saved in CLASSIFIER/hiera-sets.json.",
    )
    t.add_argument("index", metavar="COLL")
    t.add_argument("--questions", required=True, help="validation queries (QUEST format, with gold sets)")
    t.add_argument("--format", default="quest", help="question format: quest")
    t.add_argument("--classifier", required=True, help="the classifier directory (hiera train-classifier)")
    add_set_option(t, "a sets parameter held fixed while tuning (candidates=50, decompose=false, ...)")
    t.add_argument("--limit", type=int, default=None, help="only the first N queries")
    t.add_argument("--dry-run", action="store_true", help="print the thresholds without saving them")
    t.add_argument("--quiet", "-q", action="store_true")
    t.set_defaults(handler=cmd_sets)
