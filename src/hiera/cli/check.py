"""``hiera check DIR [--json] [--quick]``: the integrity checks of :mod:`hiera.check`, exit 1 on damage."""

from __future__ import annotations

import argparse
import json

from hiera.cli.common import AddCommand


def cmd_check(args: argparse.Namespace) -> int:
    # numpy and the index modules load only when checking
    from hiera.check import check_collection, iter_lines, summary

    findings = check_collection(args.index, checksums=not args.quick)
    if args.json:
        print(json.dumps({"collection": str(args.index), **summary(findings)}, indent=2))
    else:
        for line in iter_lines(findings, verbose=not args.quiet):
            print(line)
        errors = sum(f.status == "error" for f in findings)
        print(f"{args.index}: {'OK' if not errors else f'{errors} error(s)'} ({len(findings)} checks)")
    return 1 if any(f.status == "error" for f in findings) else 0


def register(add: AddCommand) -> None:
    sp = add("check", cmd_check, "check a collection's integrity (store, manifest, files, layout, indexes); exit 1 on damage")
    sp.add_argument("index", metavar="DIR")
    sp.add_argument("--json", action="store_true", help="every check as JSON")
    sp.add_argument("--quick", action="store_true", help="skip the sha256 checksums (which read every index byte)")
