"""``hiera answer``'s latency at its defaults (dhr, k = 10), and against another source tree in the same run.

    python -m bench.answer_latency --reader DIR [--questions 100] [--vs SRC --rounds 3]

Each measurement is a fresh process that opens the demo collection and the
reader once, answers 5 questions to warm up, then times
:func:`hiera.read.pipeline.answer` (retrieval and reading, what ``hiera answer``
runs after loading) on the first ``--questions`` NQ-open dev questions and
reports the p50. With ``--vs SRC`` (a directory holding another version's
``hiera`` package, e.g. ``src/`` of a ``git worktree`` of an earlier commit),
the two versions alternate ``--rounds`` times, so the load of a shared
machine falls on both, and the ratio of the medians of their p50s is the
figure (this tree over ``SRC``). The same reader reads in both: a reader
directory keeps working across versions.

Writes ``bench/out/answer_latency.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bench.common import REPO, Report, data_dir

DEMO = REPO / "collections" / "demo"


def measure(reader: str, root: str, n: int) -> dict[str, Any]:
    """One process's p50 over the first ``n`` NQ-open dev questions (run through ``--child``)."""
    import hiera
    from hiera.builds import open_collection
    from hiera.read.pipeline import answer
    from hiera.read.reader import Reader
    from hiera.retrieve import get_retriever

    with open(data_dir() / "odqa-questions" / "NQ-open.dev.jsonl", encoding="utf-8") as f:
        qs = [json.loads(line)["question"] for line in f][:n]
    r = Reader(reader)
    col = open_collection(root)
    ret = get_retriever("dhr", col)
    sep = col.store.title_sep
    for q in qs[:5]:
        answer(ret, r, q, k=10, sep=sep)
    ms = []
    for q in qs:
        t = time.perf_counter()
        answer(ret, r, q, k=10, sep=sep)
        ms.append((time.perf_counter() - t) * 1000)
    return {"code": str(Path(hiera.__file__).parent), "p50_ms": statistics.median(ms), "mean_ms": statistics.fmean(ms)}


def _run(src: Path, args: argparse.Namespace) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(src), str(REPO)])}
    out = subprocess.run([sys.executable, "-m", "bench.answer_latency", "--child", "--reader", str(args.reader),
                          "--root", str(args.root), "--questions", str(args.questions)],
                         env=env, cwd=REPO, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> Report:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reader", type=Path, required=True)
    ap.add_argument("--root", type=Path, default=DEMO, help="the collection (default: hiera demo's)")
    ap.add_argument("--questions", type=int, default=100)
    ap.add_argument("--vs", type=Path, default=None, help="another version's source directory (holding hiera/)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        print(json.dumps(measure(str(args.reader), str(args.root), args.questions)))
        return Report("answer_latency")
    if not (args.vs is None or (args.vs / "hiera" / "__init__.py").is_file()):
        raise SystemExit(f"--vs {args.vs}: no hiera package there")
    rep = Report("answer_latency", columns=["round", "version", "p50 ms", "mean ms"])
    here = REPO / "src"
    p50: dict[str, list[float]] = {"this": [], "vs": []}
    for i in range(args.rounds if args.vs else 1):
        for name, src in (("vs", args.vs), ("this", here)) if args.vs else (("this", here),):
            got = _run(src, args)
            p50[name].append(got["p50_ms"])
            rep.add({"round": i + 1, "version": str(src), "p50 ms": round(got["p50_ms"], 1),
                     "mean ms": round(got["mean_ms"], 1)})
    result: dict[str, Any] = {"p50_ms": statistics.median(p50["this"])}
    if args.vs:
        result["vs_p50_ms"] = statistics.median(p50["vs"])
        result["ratio"] = result["p50_ms"] / result["vs_p50_ms"]
        result["ratios_by_round"] = [a / b for a, b in zip(p50["this"], p50["vs"], strict=True)]
    rep.print(f"hiera answer (dhr, k = 10) over {args.root.name}, {args.questions} NQ-open dev questions, "
              f"reader {args.reader}")
    if args.vs:
        print(f"\nthis / vs, median p50s: {result['ratio']:.3f} (rounds: "
              + ", ".join(f"{r:.3f}" for r in result["ratios_by_round"]) + ")")
    rep.results["answer"] = result
    rep.write(reader=str(args.reader), questions=args.questions, vs=str(args.vs) if args.vs else None)
    return rep


if __name__ == "__main__":
    main()
