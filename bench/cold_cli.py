"""Cold ``hiera search`` calls (issue 33): what a one-off CLI question costs per retriever, start to exit.

Each trial is a fresh ``hiera search`` process (imports, opening the build,
loading the encoder, and for ``linking`` spaCy and the name table), the
retrievers alternated within every round so that machine load hits them
alike. The files are in the page cache after the first round, as they are
for a user who asks a second question. The figure the issue sets is the
median of ``linking`` minus the median of ``dhr`` (target: at most 1 s).

``python -m bench.cold_cli [--collection collections/demo] [--rounds 5]``; writes ``bench/out/cold_cli.json``.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

from bench.common import REPO, Report

DEFAULT_COLLECTION = REPO / "collections" / "demo"  # what `hiera demo` builds
QUESTIONS = [  # one per round, so that no answer is cached anywhere
    "Who directed the film Mirror and what else did Andrei Tarkovsky make?",
    "Which language family does Vietnamese belong to?",
    "Who was the commander of Apollo 11?",
    "What is the capital of Azerbaijan?",
    "Who wrote Animal Farm?",
    "Why does snow have a high albedo?",
    "Which prize did Albert Einstein win?",
]


def one_call(collection: Path, retriever: str, question: str) -> float:
    t = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "hiera", "search", str(collection), question, "-r", retriever, "-q", "--k", "3"],
        capture_output=True, text=True,
    )
    wall = time.perf_counter() - t
    if done.returncode != 0:
        raise SystemExit(f"hiera search -r {retriever} failed: {done.stderr.strip()[-300:]}")
    return wall


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--collection", type=Path, default=DEFAULT_COLLECTION)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--retrievers", default="dhr,linking")
    args = ap.parse_args()
    if not (args.collection / "index").exists():
        raise SystemExit(f"{args.collection} has no index: run `make demo` first")
    names = [r.strip() for r in args.retrievers.split(",") if r.strip()]
    walls: dict[str, list[float]] = {r: [] for r in names}
    one_call(args.collection, names[0], QUESTIONS[-1])  # page cache: the first round is not a disk benchmark
    for i in range(args.rounds):
        q = QUESTIONS[i % len(QUESTIONS)]
        for r in names if i % 2 == 0 else reversed(names):
            walls[r].append(one_call(args.collection, r, q))
            print(f"round {i + 1}: {r} {walls[r][-1]:.2f} s", flush=True)
    rep = Report("cold_cli")
    base = statistics.median(walls[names[0]])
    for r in names:
        med = statistics.median(walls[r])
        rep.add({"retriever": r, "median s": round(med, 2), "min s": round(min(walls[r]), 2),
                 "max s": round(max(walls[r]), 2), f"minus {names[0]} s": round(med - base, 2)},
                result={"walls": walls[r], "median": med, "minus_first": med - base}, echo=False)
    rep.print(f"cold `hiera search` calls on {args.collection} ({args.rounds} rounds, medians)")
    rep.write(collection=str(args.collection), rounds=args.rounds)


if __name__ == "__main__":
    main()
