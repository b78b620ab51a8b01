"""Rerun the figures in ``bench/expected.yaml`` and fail on any drift.

Each entry holds the command that produces a figure, the JSON file it writes,
the key path of the figure in that JSON, the expected value and a tolerance
(Pyserini's two-click reproductions, in miniature). Commands are run once
each, in order, without a shell.

    python bench/check_expected.py            # rerun everything, then compare
    python bench/check_expected.py --no-run   # compare the JSON already in bench/out
    python bench/check_expected.py --only wiki_qa
"""

from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).parent))
from common import REPO, table  # noqa: E402


def lookup(data: Any, path: list[str]) -> Any:
    for key in path:
        data = data[key]
    return data


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--file", type=Path, default=REPO / "bench" / "expected.yaml")
    ap.add_argument("--no-run", action="store_true")
    ap.add_argument("--only", default=None, help="only entries whose id starts with this")
    args = ap.parse_args()
    spec = yaml.safe_load(args.file.read_text(encoding="utf-8"))
    entries = [e for e in spec["figures"] if not args.only or e["id"].startswith(args.only)]
    if not entries:
        print("no entries selected", file=sys.stderr)
        return 2
    if not args.no_run:
        for cmd in dict.fromkeys(e["command"] for e in entries):
            print(f"$ {cmd}", flush=True)
            argv = shlex.split(cmd)
            if argv and argv[0] == "python":
                argv[0] = sys.executable
            subprocess.run(argv, cwd=REPO, check=True)
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
