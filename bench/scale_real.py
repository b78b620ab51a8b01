"""Hierarchical at millions of passages (issue 33): the pooled corpus plus ≥ 1M real-text distractor passages.

Parts (``--parts``, comma-separated, run in this order):

``prepare``
    writes ``bench/work/scale_real/distractors-v<V>-<N>k-s<seed>.jsonl``
    (:mod:`bench.distractors`: sentences of documents no evaluation question
    is about, recombined, their titles kept), ingests the pooled corpus
    (``bench.pooled``) and the distractors into ``real-<N>k`` and builds it
    with ``--profile small`` (Flat indexes: flat exact dense, today's default
    ``dhr``). This fills the embedding cache once (≈ 3.5 h for 1M passages
    on 2 quiet cores with onnx-int8; interrupt and rerun to resume: every
    encoded batch is cached); every later build reuses it.
``warm``
    ingests the store if it is missing (as ``prepare`` does), then only
    fills the embedding cache with the collection's passage and
    document-summary vectors, a chunk at a time, nothing else (no BM25, no
    build): the hours of ``prepare`` that can be spread over several runs.
    Interrupt it at any time; a rerun starts where the cache ends, and
    ``prepare`` afterwards encodes nothing.
``large``
    the same store, copied to ``real-<N>k-large``, built with ``--profile
    large`` (HNSW32 indexes, ``hybrid-max`` over them): no encoding, the
    vectors come from the cache.
``large-sq8``
    the same again in ``real-<N>k-large-sq8`` with the 8-bit graphs
    (``HNSW32_SQ8``) that ``auto`` gives from 2M passages: their quality
    on real text, measured where the float graphs can still be compared.
``eval``
    SQuAD dev (first 24 articles) questions, gold by passage id (so a copied
    sentence cannot count as a hit): top-1/top-20 and p50/p95 latency of
    ``bm25``, flat exact ``dense``, ``hybrid`` and today's default ``dhr``
    on the small build, and the large build's default ``dhr`` (and its
    stages as ablations); build seconds, index bytes and the peak RSS of a
    process that opens the build and runs the method. Each method runs in a
    fresh process, so its RSS is its own.
``synthetic``
    the large profile's default on ``--synthetic`` (5M) synthetic passages
    (:mod:`bench.synthetic`: vectors pre-filled into a private cache): p50 /
    p95 including query encoding and BM25, and the search process's peak RSS.

Run from the repository root: ``nice python -m bench.scale_real --parts prepare,large,eval,synthetic``;
writes ``bench/out/scale_real.json``.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import random
import resource
import shutil
import time
from pathlib import Path
from typing import Any

from bench.common import OUT, WORK, Report, data_dir
from hiera.backends import BACKENDS

HERE = WORK / "scale_real"
DEFAULT_PASSAGES = 1_000_000
TIMES = HERE / "build_seconds.json"


def collection_dir(passages: int, profile: str = "small") -> Path:
    return HERE / (f"real-{passages // 1000}k" + ("" if profile == "small" else f"-{profile}"))


def _record_build(name: str, seconds: float) -> None:
    times = json.loads(TIMES.read_text()) if TIMES.exists() else {}
    times[name] = round(seconds, 1)
    TIMES.write_text(json.dumps(times, indent=2))


def ingest_store(passages: int, seed: int) -> Path:
    """The store of pooled + distractors (written once; ``prepare`` and ``warm`` both start from it)."""
    from bench.distractors import VERSION, write_jsonl
    from bench.pooled import pooled_sources
    from hiera.corpus.ingest import ingest
    from hiera.corpus.store import STORE_FILE

    HERE.mkdir(parents=True, exist_ok=True)
    jsonl = HERE / f"distractors-v{VERSION}-{passages // 1000}k-s{seed}.jsonl"
    if not jsonl.exists():
        t = time.perf_counter()
        n = write_jsonl(jsonl, data_dir(), passages, seed)
        print(f"wrote {n} distractor documents to {jsonl} ({time.perf_counter() - t:.0f}s)", flush=True)
    root = collection_dir(passages)
    if not (root / STORE_FILE).exists():
        for paths, fmt in [*pooled_sources(data_dir()), ([jsonl], "hiera-jsonl")]:
            t = time.perf_counter()
            rep = ingest(paths, fmt, root, duplicates="keep")  # distractors keep their sources' titles: never merged
            print(f"ingested {fmt}: {rep.documents} documents, {rep.passages} passages "
                  f"({time.perf_counter() - t:.0f}s)", flush=True)
    return root


def prepare(passages: int, seed: int) -> Path:
    """The store built small (Flat): the encode happens here, unless ``warm`` filled the cache."""
    from hiera.builds import build_collection
    from hiera.index.build import BuildOptions
    from hiera.index.publish import live_build_dir

    root = ingest_store(passages, seed)
    if live_build_dir(root) is None:
        t = time.perf_counter()
        build_collection(root, BuildOptions(progress=True, profile="small"))
        _record_build(f"small-{passages // 1000}k", time.perf_counter() - t)
        print(f"built {root} in {time.perf_counter() - t:.0f}s", flush=True)
    return root


def warm(passages: int, seed: int, chunk: int = 8192) -> None:
    """Encode what ``prepare``'s build will ask for, into the embedding cache, chunk by chunk."""
    from hiera.corpus.store import CorpusStore
    from hiera.encode import DEFAULT_MODEL, Encoder
    from hiera.index.build import read_corpus

    root = ingest_store(passages, seed)
    store = CorpusStore(root)
    try:
        corpus = read_corpus(store, fulltext=False)
    finally:
        store.close()
    enc = Encoder(DEFAULT_MODEL)
    for desc, texts in (("passages", corpus.passage_texts), ("summaries", corpus.summaries)):
        t = time.perf_counter()
        for lo in range(0, len(texts), chunk):
            enc.encode_document(texts[lo:lo + chunk])
            done = min(lo + chunk, len(texts))
            print(f"warm {desc}: {done:,}/{len(texts):,} in cache ({time.perf_counter() - t:.0f}s this run)", flush=True)


def build_large(passages: int, factory: str | None = None) -> Path:
    """The same documents with the large profile (HNSW indexes): vectors from the cache, nothing encoded.

    ``factory`` (``large-sq8``: ``HNSW32_SQ8``) builds the large profile with
    other graphs, in a directory of its own, to compare them on real text.
    """
    from hiera.builds import build_collection
    from hiera.corpus.store import STORE_FILE
    from hiera.index.build import BuildOptions
    from hiera.index.publish import live_build_dir

    label = "large" if factory is None else "large-sq8"
    small, root = collection_dir(passages), collection_dir(passages, label)
    if live_build_dir(root) is None:
        shutil.rmtree(root, ignore_errors=True)
        root.mkdir(parents=True)
        shutil.copy2(small / STORE_FILE, root / STORE_FILE)
        t = time.perf_counter()
        build_collection(root, BuildOptions(progress=True, profile="large", passage_factory=factory,
                                            doc_factory=factory))
        _record_build(f"{label}-{passages // 1000}k", time.perf_counter() - t)
        print(f"built {root} in {time.perf_counter() - t:.0f}s", flush=True)
    return root


# -- one method in a process of its own -----------------------------------------------------------------------
def _run_config(job: dict[str, Any], out: Any) -> None:
    """Open the build, run the method over the questions, time single queries; send metrics and peak RSS."""
    from hiera.builds import open_collection
    from hiera.eval.questions import load_questions
    from hiera.eval.run import evaluate_retriever
    from hiera.models import passive_threads

    passive_threads()
    col = open_collection(job["root"])
    qs = load_questions(job["questions"], "squad", rules=col.store.rules)
    rng = random.Random(job["seed"])
    qs = rng.sample(qs, min(job["n"], len(qs))) if job["n"] < len(qs) else qs
    run = evaluate_retriever(col, job["method"], qs, ks=(1, 5, 20, 100), params=job["params"],
                             latency_sample=job["latency"], progress=False)
    out.put({"metrics": run.metrics, "params": {k: str(v) for k, v in run.params.items()},
             "stage_ms": run.stage_ms, **rss_parts()})


def rss_parts() -> dict[str, float]:
    """This process's peak RSS, and its RSS now split: anonymous memory vs pages of memory-mapped files.

    The peak is ``VmHWM``, not ``getrusage``'s ``ru_maxrss``: Linux carries
    ``ru_maxrss`` across fork and exec, so a process spawned by one that had
    just built 5M passages reported the builder's peak (13.5 GB) as its own.
    Mapped pages count in RSS but are the page cache's to drop; the split
    says how much of it is the vectors being memory-mapped.
    """
    parts = {}
    with open("/proc/self/status") as fh:
        for line in fh:
            key, _, value = line.partition(":")
            if key in ("VmHWM", "RssAnon", "RssFile"):
                parts[key] = int(value.split()[0]) / 1024
    return {"peak_rss_mb": parts.get("VmHWM", 0.0), "rss_anon_mb": parts.get("RssAnon", 0.0),
            "rss_file_mb": parts.get("RssFile", 0.0)}


def isolated(target: Any, job: dict[str, Any]) -> dict[str, Any]:
    """``target(job, queue)`` in a fresh spawned process: its imports, memory and peak RSS are its own."""
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    p = ctx.Process(target=target, args=(job, q))
    p.start()
    got = q.get()
    p.join()
    return got


def index_bytes(root: Path) -> int:
    from hiera.index.manifest import Manifest
    from hiera.index.publish import live_build_dir

    build = live_build_dir(root)
    return sum(Manifest.read(build).files.values()) if build else 0


def part_eval(args: argparse.Namespace, rep: Report) -> None:
    small, large = collection_dir(args.passages), collection_dir(args.passages, "large")
    sq8 = collection_dir(args.passages, "large-sq8")
    questions = data_dir() / "squad" / "dev-v1.1.first24.json"
    configs = [
        ("bm25", small, "bm25", {}),
        ("dense (flat exact)", small, "dense", {}),
        ("hybrid", small, "hybrid", {}),
        ("dhr: today's default (hybrid-max, Flat)", small, "dhr", {"doc_stage": "hybrid-max"}),
        ("dhr: large default (auto)", large, "dhr", {}),
        ("dhr: large default on 8-bit graphs (HNSW32_SQ8, what auto builds from 2M passages)", sq8, "dhr", {}),
        ("dhr: doc-hybrid on the large build (BM25 documents + mean vectors)", large, "dhr", {"doc_stage": "doc-hybrid"}),
        ("dhr: bm25 documents on the large build", large, "dhr", {"doc_stage": "bm25"}),
    ]
    times = json.loads(TIMES.read_text()) if TIMES.exists() else {}
    for label, root, method, params in configs:
        if args.only and not any(o in label for o in args.only.split(",")):
            continue
        if not (root / "index").exists():
            print(f"skipped {label!r}: {root} is not built (its --parts)", flush=True)
            continue
        res = isolated(_run_config, {"root": str(root), "method": method, "params": params, "questions": str(questions),
                            "n": args.questions, "seed": args.seed, "latency": args.latency})
        m = res["metrics"]
        profile = {large: "large", sq8: "large-sq8"}.get(root, "small")
        rep.add({
            "method": label, "top1": round(100 * m.get("gold_passage_top1", 0), 1),
            "top20": round(100 * m.get("gold_passage_top20", 0), 1),
            "answer top1": round(100 * m.get("top1", 0), 1), "p50 ms": round(m.get("latency_ms_p50", 0), 1),
            "p95 ms": round(m.get("latency_ms_p95", 0), 1), "peak RSS MB": round(res["peak_rss_mb"]),
            "build s": times.get(f"{profile}-{args.passages // 1000}k", "–"), "index GB": round(index_bytes(root) / 1e9, 2),
        }, result={**res, "root": str(root)}, key=f"{args.passages // 1000}k/{label}")  # one JSON keeps every scale


SPEED_PAIRS = {  # within-run latency ratios the issue states as targets: numerator's p50 / denominator's p50
    "large default p50 / flat dense p50": ("dhr: large default (auto)", "dense (flat exact)"),
    "large default p50 / today's default p50": ("dhr: large default (auto)", "dhr: today's default (hybrid-max, Flat)"),
}


def speed_ratios(results: dict[str, Any]) -> dict[str, Any]:
    """``<scale>/speed`` entries: p50 ratios of methods measured at one scale (machine speed cancels out).

    Derived from whatever results the JSON holds, so an ``--only`` rerun of
    one method updates the ratios it enters.
    """
    out: dict[str, Any] = {}
    scales = {key.split("/", 1)[0] for key in results if "/" in key}
    for scale in sorted(scales):
        ratios = {}
        for name, (num, den) in SPEED_PAIRS.items():
            a, b = results.get(f"{scale}/{num}"), results.get(f"{scale}/{den}")
            if a and b and b["metrics"].get("latency_ms_p50"):
                ratios[name] = round(a["metrics"]["latency_ms_p50"] / b["metrics"]["latency_ms_p50"], 4)
        if ratios:
            out[f"{scale}/speed"] = ratios
    return out


def part_synthetic(args: argparse.Namespace, rep: Report) -> None:
    """The large profile's default dhr at ``--synthetic`` synthetic passages: speed and memory only."""
    import os

    from bench.synthetic import SYNTHETIC_BACKEND, synthetic_collection
    from hiera.builds import build_collection
    from hiera.index.build import BuildOptions
    from hiera.index.publish import live_build_dir

    backend = args.synthetic_backend
    name = f"synthetic-{args.synthetic}" + ("" if backend == SYNTHETIC_BACKEND else f"-{backend}")
    base = HERE / name.replace("synthetic-", "syn-")
    corpus, cache_dir, qs = synthetic_collection(base, args.synthetic, backend=backend)
    if live_build_dir(corpus) is None:
        t = time.perf_counter()
        build_collection(corpus, BuildOptions(progress=True, profile="large", cache_dir=cache_dir, backend=backend))
        _record_build(name, time.perf_counter() - t)
        # this process made the collection and built it: its peak is the build's (the synthetic ingest is smaller)
        _record_build(f"{name} peak RSS MB", resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
    os.environ["HIERA_CACHE_DIR"] = str(cache_dir)
    res = isolated(_run_synthetic, {"root": str(corpus), "queries": qs[: args.latency]})
    times = json.loads(TIMES.read_text()) if TIMES.exists() else {}
    rep.add({"method": f"dhr: large default, {args.synthetic:,} synthetic passages, {backend} queries",
             "top1": "–", "top20": "–",
             "answer top1": "–", "p50 ms": round(res["p50"], 1), "p95 ms": round(res["p95"], 1),
             "peak RSS MB": round(res["peak_rss_mb"]), "RSS anon/file MB": f"{res['rss_anon_mb']:.0f}/{res['rss_file_mb']:.0f}",
             "build s": times.get(name, "–"),
             "index GB": round(index_bytes(corpus) / 1e9, 2)}, result=res, key=name)


def _run_synthetic(job: dict[str, Any], out: Any) -> None:
    import numpy as np

    from hiera.builds import open_collection
    from hiera.models import passive_threads
    from hiera.retrieve import get_retriever

    passive_threads()
    col = open_collection(job["root"])
    r = get_retriever("dhr", col)
    r.search(job["queries"][0], k=10)  # warm: encoder, indexes, numba
    ms, steps = [], {}
    for q in job["queries"]:
        t = time.perf_counter()
        res = r.search(q, k=10)  # one query at a time, query encoding included
        ms.append((time.perf_counter() - t) * 1000)
        for s in res.trace:
            steps.setdefault(s.name, []).append(s.ms)
    out.put({"p50": float(np.percentile(ms, 50)), "p95": float(np.percentile(ms, 95)), "n": len(ms),
             "doc_stage": r.defaults["doc_stage"], "steps_p50_ms": {k: float(np.median(v)) for k, v in steps.items()},
             **rss_parts()})


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--parts", default="prepare,large,eval")
    ap.add_argument("--passages", type=int, default=DEFAULT_PASSAGES, help="distractor passages (at least 1M for the issue)")
    ap.add_argument("--seed", type=int, default=13)
    ap.add_argument("--questions", type=int, default=2000, help="SQuAD dev questions scored (a seeded sample)")
    ap.add_argument("--latency", type=int, default=200, help="single queries timed per method")
    ap.add_argument("--only", default="", help="eval: only the methods whose label contains one of these (comma list)")
    ap.add_argument("--synthetic", type=int, default=5_000_000, help="synthetic passages for the speed part")
    ap.add_argument("--synthetic-backend", default="onnx-int8", choices=[b for b in BACKENDS if b != "auto"],
                    help="the encoder backend the synthetic build records (its query encoder): onnx-int8 is what "
                         "`auto` gives here; torch was the first runs' (their vectors are filed under it)")
    args = ap.parse_args()
    parts = [p.strip() for p in args.parts.split(",") if p.strip()]
    rep = Report("scale_real")
    if "prepare" in parts:
        prepare(args.passages, args.seed)
    if "warm" in parts:
        warm(args.passages, args.seed)
    if "large" in parts:
        build_large(args.passages)
    if "large-sq8" in parts:
        from hiera.index.profile import COMPRESSED_FACTORY

        build_large(args.passages, COMPRESSED_FACTORY)
    if "eval" in parts:
        part_eval(args, rep)
    if "synthetic" in parts:
        part_synthetic(args, rep)
    if rep.rows:
        rep.print(f"scale_real: pooled + {args.passages:,} distractor passages (gold by passage id)")
        out = OUT / "scale_real.json"
        old = json.loads(out.read_text()).get("results", {}) if out.exists() else {}
        rep.results = {**old, **rep.results}
        speed = speed_ratios(rep.results)
        rep.results.update(speed)
        for key, ratios in speed.items():
            print(f"{key}: " + ", ".join(f"{n} = {v:.3f} ({1 / v:.1f}x)" for n, v in ratios.items()), flush=True)
        rep.write(passages=args.passages, questions=args.questions, latency_sample=args.latency)


if __name__ == "__main__":
    main()
