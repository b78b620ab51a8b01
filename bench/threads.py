"""Query latency under each thread setup (issue 20): why ``dhr``'s query encoding was slower than ``dense``'s.

Both methods encode the query with the same encoder object, once; yet on 2
cores ``dhr``'s ``encode-query`` step took twice ``dense``'s. The suspect is
idle threads of one library spinning on the cores the next one needs: torch
and FAISS each load an OpenMP runtime (one thread per core) whose idle threads
busy-wait after every parallel region unless ``OMP_WAIT_POLICY=PASSIVE``. The
runtimes read the policy once, at load, so compare two runs (the CLI sets
PASSIVE unless the environment says otherwise; this script does the same
through :func:`hiera.models.passive_threads`):

    OMP_WAIT_POLICY=ACTIVE python -m bench.threads
    python -m bench.threads                      # PASSIVE
    python -m bench.threads --faiss-threads 1    # FAISS on one thread instead

Per method: single queries one after another (``Retriever.search``, k = 10,
first 10 queries warm up), end-to-end p50 / p95 and the ``encode-query``
trace step's p50 / p95, on the pooled corpus (Flat indexes), then a second
pass over the methods (order effects show as a difference between passes).
Writes ``bench/out/threads_<policy>.json``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

from bench.common import Report, data_dir, write_json
from bench.pooled import POOLED
from hiera.models import passive_threads


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", default=str(POOLED))
    ap.add_argument("--queries", type=int, default=110)
    ap.add_argument("--methods", default="dense,dhr")
    ap.add_argument("--faiss-threads", type=int, default=0, help="FAISS threads (0: OMP_NUM_THREADS / all cores)")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="dhr parameters, e.g. top_docs=10")
    args = ap.parse_args(argv)
    policy = passive_threads()["OMP_WAIT_POLICY"]  # before torch and faiss load
    from hiera.builds import open_collection
    from hiera.eval.questions import load_questions
    from hiera.index.dense import set_threads
    from hiera.retrieve import get_retriever
    from hiera.spec import parse_assignments

    set_threads(args.faiss_threads)
    col = open_collection(args.root)
    qs = [q.text for q in load_questions(data_dir() / "squad" / "dev-v1.1.first24.json", "squad")][: args.queries]
    methods = args.methods.split(",")
    sets = parse_assignments(args.set, methods)
    rep = Report(f"threads_{policy.lower()}")
    for pass_ in (1, 2):
        for name in methods:
            r = get_retriever(name, col)
            params = sets.get(name, {})
            for q in qs[:10]:
                r.search(q, k=10, **params)
            total, enc = [], []
            for q in qs[10:]:
                t = time.perf_counter()
                res = r.search(q, k=10, **params)
                total.append((time.perf_counter() - t) * 1000)
                enc.append(next(s.ms for s in res.trace if s.name == "encode-query"))
            row = {"policy": policy, "faiss threads": args.faiss_threads or "default", "pass": pass_, "method": name,
                   "p50 ms": round(float(np.percentile(total, 50)), 1), "p95 ms": round(float(np.percentile(total, 95)), 1),
                   "encode p50": round(float(np.percentile(enc, 50)), 1), "encode p95": round(float(np.percentile(enc, 95)), 1)}
            rep.add(row, key=f"{pass_}/{name}", result=row)
    rep.print(f"{len(qs) - 10} queries, pooled corpus, OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', 'unset')}")
    write_json(f"threads_{policy.lower()}", {**rep.to_dict(), "args": vars(args)})
    return 0


if __name__ == "__main__":
    sys.exit(main())
