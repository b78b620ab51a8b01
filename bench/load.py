"""HTTP load test: concurrent clients sending a mix of methods and bad requests to one collection over loopback.

Starts ``hiera serve DIR`` in a subprocess on 127.0.0.1 and a free port (or
uses ``--url``, which must be a loopback address), waits until it is warm,
then for each concurrency level in ``--clients`` (default 8 and 64) runs that
many threads, each with its own keep-alive connection, for ``--seconds``
(default 120) of wall time. Each request is either

* a good search: a question from ``--questions``, a retriever drawn from
  ``--retrievers`` (default: every method the server offers), a random k; it
  must answer 200 with hits;
* or, with probability ``--bad-fraction``, a bad one from :data:`BAD`: an
  empty or over-long query, k out of range or not a number, an unknown
  retriever or level, a parameter out of bounds, an unknown document, a
  missing or wrong API key (when ``--api-key`` is given); each must get its
  own 4xx status with a one-line ``detail``.

Reports, per level, throughput, client-side latency percentiles of the good
requests (p50/p95/p99), the server's own time (``X-Process-Time-Ms``), the
good requests that failed (must be 0) and the bad ones answered with the
wrong status (must be 0). Prints tables and writes JSON; exits 1 if any
request got a wrong answer.

    python -m bench.load /tmp/c1 --seconds 10                 # a smoke run
    python -m bench.load                                        # 8 and 64 clients, 2 minutes each
    python -m bench.load --url http://127.0.0.1:8000/ --retrievers dhr,bm25
    python -m bench.load COLL --engine ray                      # Ray Serve on a local head + 2 worker nodes
    python -m bench.load COLL --engine ray --ray-address ADDR   # Ray Serve on a running cluster

``--engine ray`` serves a sharded build with ``hiera serve --engine ray``: on
the cluster at ``--ray-address``, or on a multi-node cluster started for the
run (:class:`bench.ray_cluster.LocalRayCluster`: a head and ``--ray-workers``
worker nodes on this machine, each its own ``ray start``), stopped at the end.
The placement of the replicas (node per shard) is recorded in the JSON.

The clients run in the same machine (and Python) as the server: on a small
CPU they take cycles from it, so throughput is a floor, not a ceiling.
"""

from __future__ import annotations

import argparse
import ipaddress
import os
import random
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import numpy as np

from bench.common import OUT, REPO, data_dir, table, write_json

DEFAULT_COLLECTION = REPO / "collections" / "demo"  # what `hiera demo` builds
MAX_K = 1000
MAX_QUERY_CHARS = 2000

# (label, path, params, expected status). "{q}" is replaced by a question.
BAD: list[tuple[str, str, dict[str, Any], int]] = [
    ("empty query", "/search", {"q": "   "}, 422),
    ("query too long", "/search", {"q": "x" * (MAX_QUERY_CHARS + 1)}, 422),
    ("k = 0", "/search", {"q": "{q}", "k": 0}, 422),
    ("k over the limit", "/search", {"q": "{q}", "k": MAX_K + 1}, 422),
    ("k not a number", "/search", {"q": "{q}", "k": "ten"}, 422),
    ("unknown retriever", "/search", {"q": "{q}", "retriever": "nope"}, 400),
    ("unknown level", "/search", {"q": "{q}", "level": "sentence"}, 422),
    ("lam out of bounds", "/search", {"q": "{q}", "retriever": "dhr", "lam": -5}, 422),
    ("top_docs not a number", "/search", {"q": "{q}", "retriever": "dhr", "top_docs": "many"}, 422),
    ("unknown document", "/documents/no-such-document-id", {}, 404),
    ("no query", "/search", {}, 422),
]
KEYED_BAD = [("no API key", "/health", {}, 401), ("wrong API key", "/search", {"q": "{q}", "__key": "wrong"}, 401)]


@dataclass
class ClientLog:
    """What one client saw; merged after the run (no shared state while it runs)."""

    latency_ms: list[float] = field(default_factory=list)
    server_ms: list[float] = field(default_factory=list)
    by_method: dict[str, list[float]] = field(default_factory=dict)
    good_errors: list[str] = field(default_factory=list)
    bad_ok: int = 0
    bad_wrong: list[str] = field(default_factory=list)


def load_question_texts(path: Path, fmt: str, limit: int) -> list[str]:
    from hiera.eval.questions import load_questions

    texts = [q.text for q in load_questions(path, fmt, limit=limit)]
    if not texts:
        raise SystemExit(f"no questions in {path}")
    return texts


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_server(index: Path, port: int, timeout: float, api_key: str | None, extra: Sequence[str] = (),
                 env: dict[str, str] | None = None, log: Path | None = None) -> subprocess.Popen:
    """``hiera serve`` in a subprocess; returns once /health answers warm (warm-up is done before the port opens).

    Its output goes to ``log`` (a file: Ray Serve writes much, and a pipe nobody reads would stall the server).
    """
    cmd = [sys.executable, "-m", "hiera", "serve", str(index), "--host", "127.0.0.1", "--port", str(port), "--quiet",
           *extra]
    env = {**(env or os.environ), "HIERA_API_KEY": api_key or ""}
    log = log or Path(tempfile.mkstemp(prefix="hiera-load-", suffix=".log")[1])
    with log.open("w") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, text=True, env=env)
    deadline = time.monotonic() + timeout
    url = f"http://127.0.0.1:{port}/health"
    headers = {"X-API-Key": api_key} if api_key else {}
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"the server exited with {proc.returncode}: {log.read_text(errors='replace')[-3000:]}")
        try:
            r = httpx.get(url, timeout=5, headers=headers)
            if r.status_code == 200 and r.json().get("warm", True):
                return proc
        except httpx.TransportError:
            pass
        time.sleep(0.25)
    stop_server(proc)
    raise SystemExit(f"the server did not answer {url} within {timeout:.0f} s")


def stop_server(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=60)  # Ray Serve deletes its application first
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def check_loopback(url: str) -> None:
    host = urlsplit(url).hostname or ""
    try:
        ok = host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        ok = False
    if not ok:
        raise SystemExit(f"--url must be a loopback address (127.0.0.1, ::1, localhost), not {host!r}")


def run_client(
    i: int, base: str, questions: list[str], retrievers: list[str], bad: list[tuple], bad_fraction: float,
    api_key: str | None, deadline_box: list[float], start: threading.Barrier, log: ClientLog, seed: int,
) -> None:
    rng = random.Random(seed * 1000 + i)
    headers = {"X-API-Key": api_key} if api_key else {}
    with httpx.Client(base_url=base, timeout=120, headers=headers) as client:
        start.wait()
        deadline = deadline_box[0]  # set just before everyone passed the barrier
        while time.monotonic() < deadline:
            q = rng.choice(questions)
            if bad and rng.random() < bad_fraction:
                label, path, params, expected = rng.choice(bad)
                params = {k: (q if v == "{q}" else v) for k, v in params.items()}
                try:
                    if label == "no API key":  # a fresh request: the client's default headers carry the key
                        r = httpx.get(base.rstrip("/") + path, params=params, timeout=30)
                    elif "__key" in params:
                        r = client.get(path, params=params, headers={"X-API-Key": params.pop("__key")})
                    else:
                        r = client.get(path, params=params)
                except httpx.HTTPError as e:
                    log.bad_wrong.append(f"{label}: {type(e).__name__}: {e}")
                    continue
                detail = r.json().get("detail") if r.headers.get("content-type", "").startswith("application/json") else None
                if r.status_code == expected and isinstance(detail, str) and "\n" not in detail:
                    log.bad_ok += 1
                else:
                    log.bad_wrong.append(f"{label}: HTTP {r.status_code} (expected {expected}): {r.text[:150]}")
                continue
            retriever = rng.choice(retrievers)
            params = {"q": q, "retriever": retriever, "k": rng.choice([1, 5, 10, 20, 100])}
            t = time.perf_counter()
            try:
                r = client.get("/search", params=params)
            except httpx.HTTPError as e:
                log.good_errors.append(f"{retriever}: {type(e).__name__}: {e}")
                continue
            ms = (time.perf_counter() - t) * 1000.0
            if r.status_code != 200 or not isinstance(r.json().get("hits"), list):
                log.good_errors.append(f"{retriever}: HTTP {r.status_code}: {r.text[:200]}")
                continue
            log.latency_ms.append(ms)
            log.by_method.setdefault(retriever, []).append(ms)
            log.server_ms.append(float(r.headers.get("X-Process-Time-Ms", "nan")))


def pct(values: list[float], p: float) -> float:
    return float(np.percentile(values, p)) if values else float("nan")


def run_level(base: str, clients: int, seconds: float, questions: list[str], retrievers: list[str], bad: list[tuple],
              bad_fraction: float, api_key: str | None, seed: int) -> dict[str, Any]:
    logs = [ClientLog() for _ in range(clients)]
    barrier = threading.Barrier(clients + 1)
    deadline = [0.0]
    threads = [
        threading.Thread(target=run_client, args=(i, base, questions, retrievers, bad, bad_fraction, api_key,
                                                  deadline, barrier, logs[i], seed))
        for i in range(clients)
    ]
    for th in threads:
        th.start()
    deadline[0] = time.monotonic() + seconds
    barrier.wait()
    t0 = time.perf_counter()
    for th in threads:
        th.join()
    wall = time.perf_counter() - t0
    lat = [x for lg in logs for x in lg.latency_ms]
    server = [x for lg in logs for x in lg.server_ms]
    by_method: dict[str, list[float]] = {}
    for lg in logs:
        for m, v in lg.by_method.items():
            by_method.setdefault(m, []).extend(v)
    good_errors = [e for lg in logs for e in lg.good_errors]
    bad_wrong = [e for lg in logs for e in lg.bad_wrong]
    bad_ok = sum(lg.bad_ok for lg in logs)
    return {
        "summary": {
            "clients": clients,
            "seconds": round(wall, 1),
            "good": len(lat) + len(good_errors),
            "good_errors": len(good_errors),
            "good_error_fraction": len(good_errors) / max(1, len(lat) + len(good_errors)),  # the target: 0
            "bad": bad_ok + len(bad_wrong),
            "bad_wrong_status": len(bad_wrong),
            "throughput_rps": round((len(lat) + bad_ok) / wall, 1) if wall > 0 else 0.0,
            "p50_ms": round(pct(lat, 50), 1),
            "p95_ms": round(pct(lat, 95), 1),
            "p99_ms": round(pct(lat, 99), 1),
            "server_p50_ms": round(pct(server, 50), 1),
        },
        "per_method": {m: {"n": len(v), "p50_ms": round(pct(v, 50), 1), "p95_ms": round(pct(v, 95), 1),
                           "p99_ms": round(pct(v, 99), 1)} for m, v in sorted(by_method.items())},
        "error_examples": (good_errors + bad_wrong)[:20],
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("index", nargs="?", help=f"collection directory to serve (default {DEFAULT_COLLECTION})")
    ap.add_argument("--url", help="use a running server on this machine instead, e.g. http://127.0.0.1:8000/")
    ap.add_argument("--clients", default="8,64", help="concurrency levels, run one after the other")
    ap.add_argument("--seconds", type=float, default=120.0, help="wall time per level")
    ap.add_argument("--retrievers", default="", help="comma list (default: every method the server offers)")
    ap.add_argument("--bad-fraction", type=float, default=0.1, help="share of deliberately bad requests")
    ap.add_argument("--api-key", default=None, help="start the server with this key (or the --url server's key); adds 401 checks")
    ap.add_argument("--questions", type=Path, default=data_dir() / "squad" / "dev-v1.1.first24.json")
    ap.add_argument("--format", default="squad", help="question file format (see hiera.eval.questions)")
    ap.add_argument("--max-questions", type=int, default=2000)
    ap.add_argument("--warmup", type=int, default=5, help="unmeasured requests per retriever before the run")
    ap.add_argument("--start-timeout", type=float, default=180.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=OUT / "load.json")
    ap.add_argument("--engine", choices=["local", "ray"], default="local",
                    help="ray: `hiera serve --engine ray` (a sharded build), on --ray-address or a local multi-node cluster")
    ap.add_argument("--ray-address", default=None, help="--engine ray: join this cluster (default: start one here)")
    ap.add_argument("--ray-workers", type=int, default=2, help="worker nodes of the cluster started here (besides the head)")
    ap.add_argument("--ray-worker-cpus", type=float, default=2, help="logical CPUs of each worker node started here")
    ap.add_argument("--ray-object-store-mb", type=int, default=200, help="object store of each node started here")
    ap.add_argument("--replicas", type=int, default=1, help="--engine ray: replicas per shard")
    ap.add_argument("--shard-cpus", type=float, default=1.0, help="--engine ray: CPUs reserved per shard replica")
    args = ap.parse_args()
    if not args.url and not args.index:
        if not DEFAULT_COLLECTION.is_dir():
            ap.error(f"give a collection directory or --url ({DEFAULT_COLLECTION} does not exist)")
        args.index = str(DEFAULT_COLLECTION)
    levels = [int(x) for x in args.clients.split(",") if x.strip()]
    if not levels or min(levels) < 1 or args.seconds <= 0:
        ap.error("--clients must list positive integers and --seconds be positive")

    questions = load_question_texts(args.questions, args.format, args.max_questions)
    proc = None
    cluster = None
    ray_info: dict[str, Any] = {}
    headers = {"X-API-Key": args.api_key} if args.api_key else {}
    results = {}
    try:
        if args.url:
            check_loopback(args.url)
            base = args.url
        else:
            port = free_port()
            t = time.perf_counter()
            extra: list[str] = []
            env = dict(os.environ)
            log = None
            if args.engine == "ray":
                from bench.ray_cluster import LocalRayCluster

                address = args.ray_address
                if address is None:
                    cluster = LocalRayCluster(args.ray_workers, worker_cpus=args.ray_worker_cpus,
                                              object_store_mb=args.ray_object_store_mb)
                    address = cluster.start()
                    env.update(cluster.env())
                    ray_info["nodes"] = [{"name": n["name"], "id": n["id"], "CPU": n["resources"].get("CPU")}
                                         for n in cluster.alive_nodes()]
                    ray_info["object_store_mb"] = args.ray_object_store_mb
                    print(f"Ray cluster at {address}: {len(ray_info['nodes'])} nodes in "
                          f"{time.perf_counter() - t:.1f} s", file=sys.stderr)
                extra = ["--engine", "ray", "--ray-address", address, "--replicas", str(args.replicas),
                         "--shard-cpus", f"{args.shard_cpus:g}"]
                log = Path(tempfile.mkstemp(prefix="hiera-load-ray-", suffix=".log")[1])
            proc = start_server(Path(args.index), port, args.start_timeout, args.api_key, extra, env, log)
            print(f"server up on port {port} in {time.perf_counter() - t:.1f} s", file=sys.stderr)
            if log is not None:
                deadline = time.monotonic() + 120  # printed once the application is up, just before "serving"
                while "hiera: serving " not in log.read_text(errors="replace") and time.monotonic() < deadline:
                    time.sleep(0.5)
                ray_info["placement"] = [x.split("placement: ", 1)[1] for x in log.read_text(errors="replace").splitlines()
                                         if "hiera: placement: " in x]
            base = f"http://127.0.0.1:{port}/"
        health = httpx.get(base.rstrip("/") + "/health", timeout=10, headers=headers).json()
        retrievers = [r for r in args.retrievers.split(",") if r.strip()] or list(health["retrievers"])
        bad = BAD + (KEYED_BAD if args.api_key else [])
        if "dhr" not in health["retrievers"]:
            bad = [b for b in bad if b[2].get("retriever") != "dhr"]
        with httpx.Client(base_url=base, timeout=120, headers=headers) as c:
            for r in retrievers:
                for q in questions[: args.warmup]:
                    c.get("/search", params={"q": q, "retriever": r}).raise_for_status()
        for n in levels:
            print(f"{n} clients for {args.seconds:g} s …", file=sys.stderr, flush=True)
            results[str(n)] = run_level(base, n, args.seconds, questions, retrievers, bad, args.bad_fraction,
                                        args.api_key, args.seed)
    finally:
        if proc is not None:
            stop_server(proc)
        if cluster is not None:
            cluster.stop()

    print(table([r["summary"] for r in results.values()]))
    print()
    print(table([{"clients": n, "method": m, **d} for n, r in results.items() for m, d in r["per_method"].items()]))
    wrong = sum(r["summary"]["good_errors"] + r["summary"]["bad_wrong_status"] for r in results.values())
    for r in results.values():
        for e in r["error_examples"][:5]:
            print("error:", e, file=sys.stderr)
    payload = {
        "target": args.url or str(args.index),
        "collection": health.get("stats"),
        "retrievers": retrievers,
        "bad_requests": [{"label": b[0], "path": b[1], "expected": b[3]} for b in bad],
        "bad_fraction": args.bad_fraction,
        "questions": {"file": str(args.questions), "distinct": len(questions)},
        "engine": args.engine,
        **({"ray": ray_info} if ray_info else {}),
        "levels": results,
        "ok": wrong == 0,
    }
    print(f"wrote {write_json(args.out, payload)}", file=sys.stderr)
    return 0 if wrong == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
