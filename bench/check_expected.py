"""Rerun the figures in ``bench/expected.yaml`` and fail on any drift.

Each entry holds the command that produces a figure (a plain ``hiera ...``
command where the CLI can express it, else ``python -m bench.<script>``), an
optional ``setup:`` command that builds the collection it needs, the JSON file
the command writes, the key path of the figure in that JSON, the expected
value and a tolerance (Pyserini's two-click reproductions, in miniature).

Run from the repository root. Every distinct ``setup`` of the selected
entries runs once, in order of first appearance, then every distinct
``command``, each without a shell and with the repository root as working
directory; ``python`` is this interpreter and ``hiera`` the script beside it.

    python -m bench.check_expected              # set up, rerun everything, then compare
    python -m bench.check_expected --no-run     # compare the JSON already in bench/out
    python -m bench.check_expected --only wiki_qa
    python -m bench.check_expected --commands   # print what a run would execute, run nothing
"""

from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml

from bench.common import REPO, table


def lookup(data: Any, path: list[str]) -> Any:
    for key in path:
        data = data[key]
    return data


def argv_of(command: str) -> list[str]:
    """The argv of an entry's command: ``python`` → this interpreter, ``hiera`` → the script beside it."""
    argv = shlex.split(command)
    if not argv:
        raise ValueError("empty command")
    if argv[0] == "python":
        argv[0] = sys.executable
    elif argv[0] == "hiera":
        argv[0] = str(Path(sys.executable).with_name("hiera"))
    return argv


def plan(entries: Iterable[dict[str, Any]]) -> list[str]:
    """Distinct setups (first appearance order), then distinct commands: what a run executes."""
    entries = list(entries)
    setups = [e["setup"] for e in entries if e.get("setup")]
    return list(dict.fromkeys(setups)) + list(dict.fromkeys(e["command"] for e in entries))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--file", type=Path, default=REPO / "bench" / "expected.yaml")
    ap.add_argument("--no-run", action="store_true", help="compare the JSON already written; run nothing")
    ap.add_argument("--commands", action="store_true", help="print the setups and commands a run would execute, then stop")
    ap.add_argument("--only", default=None, help="only entries whose id starts with this")
    args = ap.parse_args()
    spec = yaml.safe_load(args.file.read_text(encoding="utf-8"))
    entries = [e for e in spec["figures"] if not args.only or e["id"].startswith(args.only)]
    if not entries:
        print("no entries selected", file=sys.stderr)
        return 2
    if args.commands:
        print("\n".join(plan(entries)))
        return 0
    if not args.no_run:
        for cmd in plan(entries):
            print(f"$ {cmd}", flush=True)
            try:
                subprocess.run(argv_of(cmd), cwd=REPO, check=True)
            except (OSError, subprocess.CalledProcessError) as err:
                print(f"failed: {cmd}: {err}", file=sys.stderr)
                return 1
    rows, failed = [], 0
    for e in entries:
        try:
            data = json.loads((REPO / e["json"]).read_text(encoding="utf-8"))
            got = float(lookup(data, e["path"]))
            ok = abs(got - float(e["expected"])) <= float(e["tolerance"])
        except (OSError, KeyError, TypeError, ValueError) as err:
            got, ok = f"missing ({err.__class__.__name__})", False
        failed += not ok
        rows.append({"id": e["id"], "expected": e["expected"], "tolerance": e["tolerance"], "got": got,
                     "status": "ok" if ok else "DRIFT"})
    print(table(rows))
    print(f"\n{len(rows) - failed} ok, {failed} drifted")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
