"""Scale out on Ray: build throughput, sharded search latency (one process vs Ray Serve), memory per shard.

Four parts, each optional:

* ``build``: the first ``--build-docs`` documents of the pooled Wikipedia
  collection (bench/pooled.py) built with 2 shards by the in-process engine,
  then by the Ray engine with 1 and 2 encoding actors, each with an empty
  embedding cache (so encoding is measured), plus an unsharded build for
  reference. Passages per second = passages / build seconds. Ray's start-up
  (``ray.init``) is reported apart; actor start-up (one model load per actor)
  is inside the build time, as a user pays it.
* ``search``: the pooled collection (14,983 documents, 26,450 passages of real
  Wikipedia, all-MiniLM-L6-v2, Flat indexes) built with 1, 2 and 4 shards
  (vectors from the embedding cache). For each shard count and method:
  exactness against a fresh unsharded build over every query (ids equal, largest
  score difference), in-process latency (Python call, threads over shards),
  then over HTTP the single-process server (``hiera serve``, uvicorn, one
  thread per shard) and Ray Serve (router + one deployment per shard) on the
  same shards: p50 / p95 of sequential requests and QPS with 4 concurrent
  clients. Ray Serve overhead = its p50 minus the single-process p50.
* ``synthetic``: the same search measurements at scale, on a synthetic
  collection of ``--synthetic-passages`` (default 1,000,000) passages of
  random Zipf-distributed words, 5 per document, whose vectors (bench/scale.py's
  clustered model) are pre-filled into a private embedding cache, so the
  unchanged ``hiera build`` encodes nothing; built with 1, 2 and 4 shards.
  Exactness is checked against the 1-shard build on 10 queries (real-text
  exactness is the ``search`` part's); queries are random words, so only
  latency, QPS and memory mean anything here.
* ``memory``: bytes per shard on disk by index kind (what each shard maps or
  loads) and the resident memory (RSS) of each Ray Serve shard replica.
* ``bytes``: bytes per vector of the FAISS index kinds SCALING.md sizes
  (Flat, HNSW32, IVF-PQ) at d = 384, measured on ``--bytes-n`` synthetic
  vectors, and BM25 bytes per passage / document of the pooled build.

This is a 2-core machine shared with other work: parallel speed-ups cannot
show here (two encoding actors compete for the cores one in-process encoder
already uses), and latencies carry the noise of the neighbours.

    python -m bench.ray_scale [--parts build,search,synthetic,bytes] [--shards 1,2,4] [--queries 200]
    python -m bench.ray_scale --parts prepare --shards 4    # bench/work/ray_scale/pooled-s4 only (expected.yaml)
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import numpy as np

from bench.common import REPO, WORK, Report, data_dir, write_json
from bench.synthetic import SYNTHETIC_BACKEND, synthetic_collection

POOLED = WORK / "pooled"
HERE = WORK / "ray_scale"
METHODS = ("bm25", "dense", "dhr", "hybrid")
CLIENTS = 4
K = 10
APP = "hiera-bench"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def questions(n: int) -> list[str]:
    data = json.loads((data_dir() / "squad" / "dev-v1.1.first24.json").read_text())
    out = [qa["question"] for art in data["data"] for para in art["paragraphs"] for qa in para["qas"]]
    return out[:n]


def ray_init() -> Any:
    import ray

    if not ray.is_initialized():
        tmp = tempfile.mkdtemp(prefix="hiera-ray-", dir="/tmp")
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, _node_ip_address="127.0.0.1",
                 _temp_dir=tmp)
    return ray


# -- build -----------------------------------------------------------------------------------------------
def subset_collection(root: Path, n_docs: int) -> int:
    """The first ``n_docs`` documents of the pooled collection, ingested at ``root``; returns passages."""
    from hiera.corpus.store import CorpusStore

    src = CorpusStore(POOLED)
    docs = []
    for d in src.iter_docs():
        doc = src.get_document(d.id)
        if doc is not None:
            docs.append(doc)
        if len(docs) >= n_docs:
            break
    store = CorpusStore(root, create=True)
    store.ingest(docs, rules=src.rules)
    n = store.stats()["passages"]
    store.close()
    return int(n)


def part_build(args: argparse.Namespace, rep: Report) -> None:
    from hiera.builds import build_collection
    from hiera.index.build import BuildOptions

    runs = [("in-process, unsharded", {}), ("in-process, 2 shards", {"shards": 2}),
            ("Ray, 1 worker, 2 shards", {"shards": 2, "engine": "ray", "workers": 1}),
            ("Ray, 2 workers, 2 shards", {"shards": 2, "engine": "ray", "workers": 2})]
    t = time.perf_counter()
    ray_init()
    ray_start = time.perf_counter() - t
    for label, opts in runs:
        root = HERE / f"build-{label.replace(' ', '').replace(',', '-')}"
        shutil.rmtree(root, ignore_errors=True)
        passages = subset_collection(root, args.build_docs)
        with tempfile.TemporaryDirectory(prefix="hiera-cache-") as cache:
            t = time.perf_counter()
            build_collection(root, BuildOptions(progress=False, cache_dir=Path(cache), **opts), log=lambda m: None)
            secs = time.perf_counter() - t
        rep.add({"part": "build", "run": label, "documents": args.build_docs, "passages": passages,
                 "seconds": round(secs, 1), "passages/s": round(passages / secs, 1)}, key=f"build/{label}",
                result={"seconds": secs, "passages": passages})
        shutil.rmtree(root, ignore_errors=True)
    rep.results["build/ray_init_s"] = ray_start


# -- search ----------------------------------------------------------------------------------------------
def sharded_copy(n: int) -> Path:
    """The pooled corpus built with ``n`` shards (0: unsharded; vectors from the embedding cache); built once."""
    from hiera.builds import build_collection
    from hiera.index.build import BuildOptions
    from hiera.index.publish import live_build_dir

    root = HERE / f"pooled-s{n}"
    if live_build_dir(root) is None:
        shutil.rmtree(root, ignore_errors=True)
        root.mkdir(parents=True)
        shutil.copy2(POOLED / "corpus.sqlite", root / "corpus.sqlite")
        t = time.perf_counter()
        build_collection(root, BuildOptions(progress=False, shards=n), log=lambda m: None)
        print(f"built {root} ({n} shards) in {time.perf_counter() - t:.1f}s", flush=True)
    return root


def percentiles(ms: list[float]) -> dict[str, float]:
    a = np.asarray(ms)
    return {"p50_ms": round(float(np.percentile(a, 50)), 2), "p95_ms": round(float(np.percentile(a, 95)), 2)}


def http_latency(url: str, method: str, qs: list[str]) -> dict[str, float]:
    """Sequential requests (p50/p95), then ``CLIENTS`` concurrent clients over the same queries (QPS)."""

    def one(q: str) -> float:
        params = urllib.parse.urlencode({"q": q, "retriever": method, "k": K})
        t = time.perf_counter()
        with urllib.request.urlopen(f"{url}search?{params}", timeout=60) as r:
            r.read()
        return (time.perf_counter() - t) * 1000

    for q in qs[:10]:
        one(q)
    ms = [one(q) for q in qs]
    done: list[float] = []
    lock = threading.Lock()
    chunks = [qs[i::CLIENTS] for i in range(CLIENTS)]

    def client(part: list[str]) -> None:
        for q in part:
            v = one(q)
            with lock:
                done.append(v)

    t = time.perf_counter()
    threads = [threading.Thread(target=client, args=(c,)) for c in chunks]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    return {**percentiles(ms), "qps": round(len(done) / (time.perf_counter() - t), 1)}


def health_p50(url: str, n: int = 60) -> float:
    """p50 of ``GET /health``: the HTTP path alone (no encoding, no shard call), i.e. the hop a server adds."""
    ms = []
    for i in range(n + 10):
        t = time.perf_counter()
        with urllib.request.urlopen(url + "health", timeout=60) as r:
            r.read()
        if i >= 10:
            ms.append((time.perf_counter() - t) * 1000)
    return round(float(np.percentile(ms, 50)), 2)


def wait_health(url: str, timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url + "health", timeout=5) as r:
                if json.loads(r.read()).get("warm"):
                    return
        except OSError:
            pass
        time.sleep(0.5)
    raise RuntimeError(f"{url} did not come up")


def exactness(one: Any, col: Any, qs: list[str]) -> dict[str, Any]:
    from hiera.retrieve import get_retriever

    out: dict[str, Any] = {}
    for m in METHODS:
        same, worst, ms = 0, 0.0, []
        a_r, b_r = get_retriever(m, one), get_retriever(m, col)
        for level in ("passage", "doc"):
            for q in qs:
                a = a_r.search(q, k=K, level=level)
                t = time.perf_counter()
                b = b_r.search(q, k=K, level=level)
                if level == "passage":
                    ms.append((time.perf_counter() - t) * 1000)
                ids_a = [(h.doc_id, h.passage_id) for h in a]
                same += ids_a == [(h.doc_id, h.passage_id) for h in b]
                worst = max([worst] + [abs(x.score - y.score) for x, y in zip(a, b, strict=False)])
        out[m] = {"identical": f"{same}/{2 * len(qs)}", "max_score_diff": worst, "in_process": percentiles(ms)}
    return out


def shard_rss(app: str) -> list[int]:
    import psutil

    out = []
    for p in psutil.process_iter(["cmdline"]):
        cmd = " ".join(p.info.get("cmdline") or [])
        if f"ServeReplica:{app}:shard-" in cmd:
            try:
                out.append(int(p.memory_info().rss))
            except psutil.Error:
                pass
    return out


def measure_shards(root: Path, n: int, qs: list[str], one: Any, rep: Report, memory: Report, rport: int,
                   prefix: str = "", exact_qs: int | None = None) -> None:
    """Exactness against ``one``, then single-process HTTP and Ray Serve latency, then memory, for one build."""
    from ray import serve

    from hiera.builds import open_collection
    from hiera.serve.ray import deploy

    col = open_collection(root)
    exact = exactness(one, col, qs[: exact_qs or len(qs)])
    port = free_port()
    proc = subprocess.Popen(
        [str(Path(sys.executable).parent / "hiera"), "serve", str(root), "--port", str(port), "--quiet"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=REPO, env={**os.environ},
    )
    try:
        url = f"http://127.0.0.1:{port}/"
        wait_health(url)
        local = {m: http_latency(url, m, qs) for m in METHODS}
        local_health = health_p50(url)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    rurl = deploy(root, port=rport, shard_cpus=0, router_cpus=0, app_options={"api_key": ""}, name=APP)
    wait_health(rurl)
    remote = {m: http_latency(rurl, m, qs) for m in METHODS}
    remote_health = health_p50(rurl)
    rss = shard_rss(APP)
    serve.delete(APP)
    for m in METHODS:
        row = {"part": f"{prefix}search", "shards": n, "method": m, "identical": exact[m]["identical"],
               "max_diff": f"{exact[m]['max_score_diff']:.1e}",
               "python p50": exact[m]["in_process"]["p50_ms"],
               "http p50": local[m]["p50_ms"], "http p95": local[m]["p95_ms"], "http qps": local[m]["qps"],
               "ray p50": remote[m]["p50_ms"], "ray p95": remote[m]["p95_ms"], "ray qps": remote[m]["qps"],
               "overhead p50": round(remote[m]["p50_ms"] - local[m]["p50_ms"], 2)}
        rep.add(row, key=f"{prefix}search/{n}/{m}",
                result={"exact": exact[m], "single_process": local[m], "ray_serve": remote[m]})
    rep.add({"part": f"{prefix}search", "shards": n, "method": "GET /health (no shard call)", "http p50": local_health,
             "ray p50": remote_health, "overhead p50": round(remote_health - local_health, 2)},
            key=f"{prefix}search/{n}/health", result={"single_process": local_health, "ray_serve": remote_health})
    shards_dir = (root / "index").resolve() / "shards"
    for i, d in enumerate(sorted(shards_dir.iterdir())):
        sizes: dict[str, int] = {}
        for f in d.rglob("*"):
            if f.is_file():
                kind = f.parent.name if f.parent != d else "manifest"
                kind = {"dense": f.name.split(".")[0] + (".faiss" if f.suffix == ".faiss" else ".f16")}.get(kind, kind)
                sizes[kind] = sizes.get(kind, 0) + f.stat().st_size
        memory.add({"part": f"{prefix}memory", "shards": n, "shard": d.name,
                    "disk_MB": round(sum(sizes.values()) / 1e6, 1),
                    "bm25_MB": round((sizes.get("bm25-passages", 0) + sizes.get("bm25-docs", 0)) / 1e6, 1),
                    "faiss_MB": round(sum(v for k, v in sizes.items() if k.endswith(".faiss")) / 1e6, 1),
                    "f16_MB": round(sum(v for k, v in sizes.items() if k.endswith(".f16")) / 1e6, 1),
                    "replica_rss_MB": round(sorted(rss)[i] / 1e6, 1) if i < len(rss) else ""},
                   key=f"{prefix}memory/{n}/{d.name}", result=sizes)


def part_search(args: argparse.Namespace, rep: Report, memory: Report) -> None:
    from hiera.builds import open_collection

    qs = questions(args.queries)
    # the reference is a fresh unsharded build of the same corpus: bench/work/pooled's own build predates the
    # float16 rounding of FAISS vectors (index/build.py), so its FAISS scores differ from any fresh build by ~1e-4
    one = open_collection(sharded_copy(0))
    ray_init()
    rport = free_port()  # one Serve instance for every shard count: applications are replaced, not Serve
    for n in args.shards:
        measure_shards(sharded_copy(n), n, qs, one, rep, memory, rport)


def part_synthetic(args: argparse.Namespace, rep: Report, memory: Report) -> None:
    """Sharded search on ``--synthetic-passages`` synthetic passages: 1, 2, 4 shards, single process vs Ray Serve."""
    from hiera.builds import build_collection, open_collection
    from hiera.index.build import BuildOptions
    from hiera.index.publish import live_build_dir

    corpus, cache_dir, qs = synthetic_collection(HERE / f"syn-{args.synthetic_passages}", args.synthetic_passages,
                                                 backend=SYNTHETIC_BACKEND)
    qs = qs[: args.synthetic_queries]
    os.environ["HIERA_CACHE_DIR"] = str(cache_dir)  # the servers' encoders read queries only, but use this cache
    roots = {}
    for n in args.shards:
        root = corpus.parent / f"s{n}"
        if live_build_dir(root) is None:
            shutil.rmtree(root, ignore_errors=True)
            root.mkdir()
            shutil.copy2(corpus / "corpus.sqlite", root / "corpus.sqlite")
            t = time.perf_counter()
            build_collection(root, BuildOptions(progress=True, shards=n, cache_dir=cache_dir, backend=SYNTHETIC_BACKEND),
                             log=print)
            secs = time.perf_counter() - t
            rep.results[f"synthetic/build/{n}"] = secs
            print(f"built {root} ({n} shards) in {secs:.0f}s", flush=True)
        roots[n] = root
    one = open_collection(roots[min(roots)])  # the reference: the fewest shards (exactness is proved on real text)
    ray_init()
    rport = free_port()
    for n, root in roots.items():
        measure_shards(root, n, qs, one, rep, memory, rport, prefix="synthetic-", exact_qs=10)


# -- bytes per vector -------------------------------------------------------------------------------------
def part_bytes(args: argparse.Namespace, rep: Report) -> None:
    from hiera.index.dense import build_faiss, save_faiss, save_matrix

    rng = np.random.default_rng(0)
    n, d = args.bytes_n, 384
    x = rng.standard_normal((n, d)).astype(np.float32)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    with tempfile.TemporaryDirectory(prefix="hiera-bytes-") as tmp:
        path = Path(tmp) / "m.f16.npy"
        save_matrix(path, x)
        rep.add({"part": "bytes", "index": "float16 matrix", "vectors": n, "bytes/vector": round(path.stat().st_size / n, 1)},
                key="bytes/f16", result=path.stat().st_size / n)
        for factory in ("Flat", "HNSW32", "IVF1024,PQ32"):
            t = time.perf_counter()
            idx = build_faiss(x, factory)
            secs = time.perf_counter() - t
            p = Path(tmp) / "x.faiss"
            save_faiss(idx, p)
            rep.add({"part": "bytes", "index": factory, "vectors": n, "bytes/vector": round(p.stat().st_size / n, 1),
                     "build_s": round(secs, 1)}, key=f"bytes/{factory}", result=p.stat().st_size / n)
    live = (POOLED / "index").resolve()
    m = json.loads((live / "manifest.json").read_text())
    for kind, count in (("bm25-passages", m["passages"]), ("bm25-docs", m["documents"])):
        size = sum(v for f, v in m["files"].items() if f.startswith(kind + "/"))
        rep.add({"part": "bytes", "index": f"{kind} (pooled Wikipedia)", "vectors": count,
                 "bytes/vector": round(size / count, 1)}, key=f"bytes/{kind}", result=size / count)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--parts", default="build,search,bytes",
                    help="comma list of build, search, synthetic, bytes (search and synthetic include memory); prepare: only build the "
                    "sharded pooled collections bench/work/ray_scale/pooled-sN (expected.yaml's setup)")
    ap.add_argument("--shards", default="1,2,4")
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--build-docs", type=int, default=300)
    ap.add_argument("--bytes-n", type=int, default=50_000)
    ap.add_argument("--name", default="ray_scale", help="the report's name: bench/out/NAME.json")
    ap.add_argument("--synthetic-passages", type=int, default=1_000_000)
    ap.add_argument("--synthetic-queries", type=int, default=40)
    args = ap.parse_args(argv)
    args.shards = [int(s) for s in args.shards.split(",")]
    parts = set(args.parts.split(","))
    os.environ.setdefault("OMP_NUM_THREADS", "2")
    HERE.mkdir(parents=True, exist_ok=True)
    rep, memory, sizes, builds = Report("ray_scale"), Report("ray_scale-memory"), Report("ray_scale-bytes"), Report("b")
    if parts == {"prepare"}:
        for n in args.shards:
            print(sharded_copy(n))
        return 0
    try:
        if "bytes" in parts:
            part_bytes(args, sizes)
        if "build" in parts:
            part_build(args, builds)
        if "search" in parts:
            part_search(args, rep, memory)
        if "synthetic" in parts:
            part_synthetic(args, rep, memory)
    finally:
        try:
            import ray

            if ray.is_initialized():
                from ray import serve

                serve.shutdown()
                ray.shutdown()
        except ImportError:
            pass
    for r, title in ((builds, "build throughput"), (rep, "search"), (memory, "memory per shard"), (sizes, "bytes")):
        if r.rows:
            r.print(title)
    write_json(args.name, {"build": builds.to_dict(), "search": rep.to_dict(), "memory": memory.to_dict(),
                             "bytes": sizes.to_dict(), "args": {k: v for k, v in vars(args).items()}})
    over = [r["overhead p50"] for r in rep.rows if "identical" in r]
    print(f"median of medians: {statistics.median(over) if over else '-'} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
