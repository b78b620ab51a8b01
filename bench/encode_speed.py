"""Encoder backends on this machine: throughput, query latency, and what they do to retrieval.

Three parts, one run, every figure a ratio to the torch backend measured in
the same run:

1. **Throughput**: ``--sample`` passages of the pooled corpus (seeded, the
   titled texts a build encodes), no embedding cache, after a warm-up batch;
   passages per second and the ratio to torch. The cosine of each backend's
   vectors to torch's (mean, min) says how far apart they are.
2. **Query latency**: ``encode_query`` on ``--queries`` dev questions one at a
   time (what a search pays): p50 / p95 ms.
3. **Retrieval** on the pooled benchmark (SQuAD dev first-24, passage top-1 /
   top-20 of ``dense`` and the default ``dhr``):

   * ``full`` backends (``--full``, default ``onnx-int8``): the pooled corpus
     rebuilt with the backend in ``bench/work/pooled-<backend>`` (its own
     embedding cache key, so an interrupted build resumes) and searched with
     it — the test for a backend whose vectors differ;
   * every other backend: queries encoded by it against the torch build. For
     the float backends, whose document vectors equal torch's (part 1's
     cosine), that is the same ranking a full rebuild gives, for minutes
     instead of an hour.

4. **Kernels** (``--kernels``): ONNX Runtime's profiler over the same passages
   in the float and the int8 graph, time per operator. It says where int8
   stops paying on this CPU: how much faster its matrix products run, and
   what the other operators (layer norms, GELU) cost either way.

    python -m bench.encode_speed                                 # everything (≈ 30 min the first time)
    python -m bench.encode_speed --sample 300 --no-quality       # throughput only
    python -m bench.encode_speed --backends torch,onnx,onnx-int8 --no-quality --kernels
"""

from __future__ import annotations

import argparse
import gc
import random
import shutil
import time
from pathlib import Path
from typing import Any

import numpy as np

from bench.common import WORK, Report, data_dir
from bench.pooled import POOLED, ensure_pooled

BACKENDS = ["torch", "onnx", "onnx-int8", "openvino"]


def sample_texts(root: Path, n: int, seed: int) -> list[str]:
    from hiera.corpus.store import CorpusStore

    store = CorpusStore(root)
    sep = store.title_sep
    texts = [p.titled_text(sep) for _, p in store.iter_passages()]
    store.close()
    return random.Random(seed).sample(texts, min(n, len(texts)))


def throughput(backends: list[str], texts: list[str], questions: list[str], batch_size: int) -> tuple[list[dict], dict]:
    from hiera.encode import Encoder

    rows, vecs = [], {}
    for b in backends:
        gc.collect()  # the previous backend's runtime and its threads go first
        t = time.perf_counter()
        enc = Encoder(use_cache=False, backend=b, batch_size=batch_size)
        load_s = time.perf_counter() - t
        enc.encode_document(texts[:batch_size])  # warm-up: first-call allocations and kernel choice
        t = time.perf_counter()
        vecs[b] = enc.encode_document(texts)
        secs = time.perf_counter() - t
        enc.encode_query(questions[0])
        lat = []
        for q in questions:
            t = time.perf_counter()
            enc.encode_query(q)
            lat.append((time.perf_counter() - t) * 1000)
        rows.append({"backend": b, "passages/s": round(len(texts) / secs, 1), "load s": round(load_s, 1),
                     "query p50 ms": round(float(np.percentile(lat, 50)), 2),
                     "query p95 ms": round(float(np.percentile(lat, 95)), 2)})
        print(rows[-1], flush=True)
        del enc
    base = next((r["passages/s"] for r in rows if r["backend"] == "torch"), None)
    for r in rows:
        if base:
            r["× torch"] = round(r["passages/s"] / base, 2)
        if "torch" in vecs:
            cos = (vecs[r["backend"]] * vecs["torch"]).sum(axis=1)
            r["cos mean"], r["cos min"] = round(float(cos.mean()), 5), round(float(cos.min()), 5)
    return rows, vecs


# Operators that multiply matrices (float, and int8 with their on-the-fly activation quantization).
MATMUL_OPS = {"MatMul", "FusedMatMul", "Attention", "QAttention", "DynamicQuantizeMatMul", "DynamicQuantizeLinear",
              "MatMulInteger", "MatMulIntegerToFloat"}


def kernels(texts: list[str], batch: int) -> tuple[list[dict], dict]:
    """Seconds per operator of the float and the int8 graph over ``texts``, and the matrix products' speed-up."""
    import collections
    import json
    import tempfile

    import onnxruntime as ort

    from hiera.backends import session_options
    from hiera.encode import Encoder

    enc = Encoder(use_cache=False, backend="onnx-int8")
    graphs = {"float": enc.graph.query_path, "int8": enc.graph.path}  # the int8 backend's two graphs
    order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
    feeds = [{k: v.numpy() for k, v in enc.model.preprocess([texts[i] for i in order[s : s + batch]]).items()
              if hasattr(v, "numpy")} for s in range(0, len(order), batch)]
    secs: dict[str, collections.Counter] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, path in graphs.items():
            so = session_options()  # as hiera runs the graphs
            so.enable_profiling, so.profile_file_prefix = True, str(Path(tmp) / name)
            session = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
            inputs = [i.name for i in session.get_inputs()]
            for f in [feeds[0], *feeds]:  # the first run warms up and is left out below
                session.run(None, {n: f[n] for n in inputs})
            events = json.loads(Path(session.end_profiling()).read_text())
            runs = sorted(e["ts"] + e["dur"] for e in events if e.get("name") == "model_run")
            agg: collections.Counter = collections.Counter()
            for e in events:
                if e.get("cat") == "Node" and e.get("name", "").endswith("_kernel_time") and e["ts"] > runs[0]:
                    agg[e["args"]["op_name"]] += e["dur"] / 1e6
            secs[name] = agg
    rows = []
    for op in sorted(set(secs["float"]) | set(secs["int8"]), key=lambda o: -(secs["float"][o] + secs["int8"][o])):
        f, q = secs["float"][op], secs["int8"][op]
        if f + q >= 0.01:
            rows.append({"operator": op, "matrix product": op in MATMUL_OPS, "float s": round(f, 2),
                         "int8 s": round(q, 2)})
    mm = {g: sum(v for o, v in secs[g].items() if o in MATMUL_OPS) for g in secs}
    rest = {g: sum(secs[g].values()) - mm[g] for g in secs}
    summary = {"matrix products float s": round(mm["float"], 2), "matrix products int8 s": round(mm["int8"], 2),
               "matrix products speed-up": round(mm["float"] / mm["int8"], 2),
               "other operators float s": round(rest["float"], 2), "other operators int8 s": round(rest["int8"], 2),
               "int8 graph speed-up": round(sum(secs["float"].values()) / sum(secs["int8"].values()), 2)}
    return rows, summary


def needed_matmul_speedup(summary: dict, float_over_torch: float, target: float = 2.0) -> float:
    """The int8 matrix-product speed-up that would bring the int8 graph to ``target`` × torch (others unchanged)."""
    total_float = summary["matrix products float s"] + summary["other operators float s"]
    budget = total_float * float_over_torch / target - summary["other operators int8 s"]
    return float("inf") if budget <= 0 else round(summary["matrix products float s"] / budget, 2)


def pooled_copy(backend: str) -> Path:
    """The pooled corpus built with ``backend``: the torch build's corpus copied, then built (resumable)."""
    from hiera.corpus.store import STORE_FILE
    from hiera.index.build import BuildOptions, build
    from hiera.index.publish import live_build_dir

    root = WORK / f"pooled-{backend}"
    if live_build_dir(root) is None:
        root.mkdir(parents=True, exist_ok=True)
        if not (root / STORE_FILE).exists():
            shutil.copy2(POOLED / STORE_FILE, root / STORE_FILE)
        t = time.perf_counter()
        build(root, BuildOptions(backend=backend))
        print(f"built {root} with {backend} in {time.perf_counter() - t:.0f}s", flush=True)
    return root


def quality(backends: list[str], full: set[str], limit: int | None, retrievers: list[str]) -> list[dict]:
    from hiera.builds import open_collection
    from hiera.eval.questions import load_questions
    from hiera.eval.run import evaluate_retriever

    rows = []
    for b in backends:
        if b in full and b != "torch":
            col, how = open_collection(pooled_copy(b)), "rebuilt"
        else:
            col, how = open_collection(POOLED, backend=b), "queries only" if b != "torch" else "reference"
        qs = load_questions(data_dir() / "squad" / "dev-v1.1.first24.json", "squad", limit=limit, rules=col.store.rules)
        for name in retrievers:
            m = evaluate_retriever(col, name, qs, ks=(1, 20), progress=False, latency_sample=200).metrics
            rows.append({"backend": b, "index": how, "retriever": name, "questions": len(qs),
                         "metrics": {k: round(float(m[k]), 4) for k in ("top1", "top20")},
                         "top1": round(100 * m["top1"], 2), "top20": round(100 * m["top20"], 2),
                         "p50 ms": round(m.get("latency_ms_p50", float("nan")), 1),
                         "p95 ms": round(m.get("latency_ms_p95", float("nan")), 1)})
            print({k: v for k, v in rows[-1].items() if k != "metrics"}, flush=True)
        # let this backend's runtime threads go before the next one is timed: the ONNX Runtime and
        # OpenVINO pools of earlier backends, left alive, doubled a later backend's DHR latency
        del col
        gc.collect()
    ref = {r["retriever"]: r for r in rows if r["backend"] == "torch"}
    for r in rows:
        if r["retriever"] in ref:
            r["Δtop1"] = round(r["top1"] - ref[r["retriever"]]["top1"], 2)
            r["Δtop20"] = round(r["top20"] - ref[r["retriever"]]["top20"], 2)
    return rows


def main() -> None:
    from hiera.eval.questions import load_questions

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--backends", default=",".join(BACKENDS))
    ap.add_argument("--sample", type=int, default=1000, help="passages timed per backend")
    ap.add_argument("--queries", type=int, default=200, help="questions encoded one by one per backend")
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--full", default="onnx-int8", help="backends judged on a full rebuild of the pooled corpus")
    ap.add_argument("--retrievers", default="dense,dhr")
    ap.add_argument("--limit", type=int, default=None, help="first N dev questions in part 3")
    ap.add_argument("--no-quality", action="store_true", help="parts 1 and 2 only")
    ap.add_argument("--kernels", action="store_true", help="part 4: time per operator, float and int8 graphs")
    ap.add_argument("--name", default="encode_speed")
    args = ap.parse_args()

    backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    ensure_pooled()
    texts = sample_texts(POOLED, args.sample, args.seed)
    questions = [q.text for q in load_questions(data_dir() / "squad" / "dev-v1.1.first24.json", "squad",
                                                limit=args.queries)]
    speed, _ = throughput(backends, texts, questions, args.batch_size)
    report = Report(args.name)
    for r in speed:
        report.add(r, echo=False)
    report.print(f"Encoding throughput ({len(texts)} pooled passages, batch {args.batch_size}) and query latency")
    extra: dict[str, Any] = {"speed": speed, "sample": len(texts), "seed": args.seed}
    if args.kernels:
        from hiera.backends import GRAPH_BATCH

        rows, summary = kernels(texts, GRAPH_BATCH)
        k = Report(f"{args.name}-kernels")
        for r in rows:
            k.add(r, echo=False)
        k.print(f"ONNX Runtime time per operator ({len(texts)} passages, batches of {GRAPH_BATCH})")
        ratio = {r["backend"]: r.get("× torch") for r in speed}
        if ratio.get("onnx"):
            summary["matrix products speed-up needed for 2× torch"] = needed_matmul_speedup(summary, ratio["onnx"])
        print("  ".join(f"{key}: {v}" for key, v in summary.items()))
        extra["kernels"] = {"operators": rows, **summary}
    if not args.no_quality:
        full = {b.strip() for b in args.full.split(",") if b.strip()}
        rows = quality(backends, full, args.limit, [r.strip() for r in args.retrievers.split(",") if r.strip()])
        q = Report(f"{args.name}-quality")
        for r in rows:
            q.add({k: v for k, v in r.items() if k != "metrics"}, echo=False)
        q.print("Retrieval on the pooled benchmark (passage top-k, %)")
        extra["quality"] = rows
    # one record per backend, so bench/expected.yaml can name a figure by path: [by_backend, onnx, dhr, top1]
    by_backend: dict[str, dict[str, Any]] = {r["backend"]: dict(r) for r in speed}
    for r in extra.get("quality", []):
        by_backend.setdefault(r["backend"], {})[r["retriever"]] = r["metrics"]  # fractions, as expected.yaml holds
    extra["by_backend"] = by_backend
    report.write(**extra)


if __name__ == "__main__":
    main()
