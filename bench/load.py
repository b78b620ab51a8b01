"""HTTP load test: N concurrent clients searching one collection over loopback.

Starts ``hiera serve DIR`` in a subprocess on 127.0.0.1 and a free port (or
uses ``--url``), waits until it is warm, then runs ``--clients`` threads, each
with its own keep-alive connection, sending ``--requests`` searches of varied
questions. The run is bounded twice: by the request count and by
``--max-seconds`` of wall time, so it always stops by itself.

Reports throughput, client-side latency percentiles (what a user waits),
the server's own time (``X-Process-Time-Ms``) and the search time inside it
(``took_ms``), and the error count. Prints a table and writes JSON.

    python -m bench.load /tmp/c1 --clients 8 --requests 50
    python -m bench.load --url http://127.0.0.1:8000/ --retriever hybrid

Note the clients run in the same machine (and Python) as the server: on a
small CPU they take cycles from it, so throughput is a floor, not a ceiling.
"""

from __future__ import annotations

import argparse
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from bench.common import OUT, REPO, data_dir, table, write_json

DEFAULT_COLLECTION = REPO / "collections" / "demo"  # what `hiera demo` builds


@dataclass
class ClientLog:
    """What one client saw; merged after the run (no shared state while it runs)."""

    latency_ms: list[float] = field(default_factory=list)
    server_ms: list[float] = field(default_factory=list)
    search_ms: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


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


def start_server(index: Path, port: int, timeout: float) -> subprocess.Popen:
    """``hiera serve`` in a subprocess; returns once /health answers (warm-up is done before the port opens)."""
    cmd = [sys.executable, "-m", "hiera", "serve", str(index), "--host", "127.0.0.1", "--port", str(port), "--quiet"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + timeout
    url = f"http://127.0.0.1:{port}/health"
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"the server exited with {proc.returncode}: {proc.stderr.read() if proc.stderr else ''}")
        try:
            if httpx.get(url, timeout=2).status_code == 200:
                return proc
        except httpx.TransportError:
            pass
        time.sleep(0.25)
    stop_server(proc)
    raise SystemExit(f"the server did not answer {url} within {timeout:.0f} s")


def stop_server(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def run_client(
    i: int, base: str, questions: list[str], n: int, params: dict[str, Any], deadline: float, start: threading.Barrier, log: ClientLog
) -> None:
    with httpx.Client(base_url=base, timeout=60) as client:
        start.wait()
        for j in range(n):
            if time.monotonic() >= deadline:
                break
            q = questions[(i * 7919 + j) % len(questions)]  # clients walk the list from different places
            t = time.perf_counter()
            try:
                r = client.get("/search", params={"q": q, **params})
            except httpx.HTTPError as e:
                log.errors.append(f"{type(e).__name__}: {e}")
                continue
            ms = (time.perf_counter() - t) * 1000.0
            if r.status_code != 200:
                log.errors.append(f"HTTP {r.status_code}: {r.text[:200]}")
                continue
            log.latency_ms.append(ms)
            log.server_ms.append(float(r.headers.get("X-Process-Time-Ms", "nan")))
            log.search_ms.append(float(r.json().get("took_ms", float("nan"))))


def pct(values: list[float], p: float) -> float:
    return float(np.percentile(values, p)) if values else float("nan")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("index", nargs="?", help=f"collection directory to serve (default {DEFAULT_COLLECTION})")
    ap.add_argument("--url", help="use a running server instead, e.g. http://127.0.0.1:8000/")
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--requests", type=int, default=200, help="requests per client")
    ap.add_argument("--max-seconds", type=float, default=300.0, help="stop sending after this much wall time")
    ap.add_argument("--retriever", default="dhr")
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--questions", type=Path, default=data_dir() / "squad" / "dev-v1.1.first24.json")
    ap.add_argument("--format", default="squad", help="question file format (see hiera.eval.questions)")
    ap.add_argument("--max-questions", type=int, default=2000)
    ap.add_argument("--warmup", type=int, default=5, help="unmeasured requests before the run")
    ap.add_argument("--start-timeout", type=float, default=180.0)
    ap.add_argument("--out", type=Path, default=OUT / "load.json")
    args = ap.parse_args()
    if not args.url and not args.index:
        if not DEFAULT_COLLECTION.is_dir():
            ap.error(f"give a collection directory or --url ({DEFAULT_COLLECTION} does not exist)")
        args.index = str(DEFAULT_COLLECTION)
    if args.clients < 1 or args.requests < 1:
        ap.error("--clients and --requests must be positive")

    questions = load_question_texts(args.questions, args.format, args.max_questions)
    proc = None
    if args.url:
        base = args.url
    else:
        port = free_port()
        t = time.perf_counter()
        proc = start_server(Path(args.index), port, args.start_timeout)
        print(f"server up on port {port} in {time.perf_counter() - t:.1f} s", file=sys.stderr)
        base = f"http://127.0.0.1:{port}/"
    params = {"retriever": args.retriever, "k": args.k}
    try:
        health = httpx.get(base.rstrip("/") + "/health", timeout=10).json()
        with httpx.Client(base_url=base, timeout=60) as c:
            for q in questions[: args.warmup]:
                c.get("/search", params={"q": q, **params}).raise_for_status()
        logs = [ClientLog() for _ in range(args.clients)]
        barrier = threading.Barrier(args.clients + 1)
        deadline = time.monotonic() + args.max_seconds
        threads = [
            threading.Thread(target=run_client, args=(i, base, questions, args.requests, params, deadline, barrier, logs[i]))
            for i in range(args.clients)
        ]
        for th in threads:
            th.start()
        barrier.wait()
        t0 = time.perf_counter()
        for th in threads:
            th.join()
        wall = time.perf_counter() - t0
    finally:
        if proc is not None:
            stop_server(proc)

    lat = [x for lg in logs for x in lg.latency_ms]
    server = [x for lg in logs for x in lg.server_ms]
    search = [x for lg in logs for x in lg.search_ms]
    errors = [e for lg in logs for e in lg.errors]
    sent = len(lat) + len(errors)
    summary = {
        "clients": args.clients,
        "requests": sent,
        "ok": len(lat),
        "errors": len(errors),
        "wall_s": round(wall, 3),
        "throughput_rps": round(len(lat) / wall, 2) if wall > 0 else 0.0,
        "stopped_by_time": sent < args.clients * args.requests,
    }
    latency = {
        name: {"p50": pct(v, 50), "p95": pct(v, 95), "p99": pct(v, 99), "mean": float(np.mean(v)) if v else float("nan"), "max": max(v, default=float("nan"))}
        for name, v in (("client_ms", lat), ("server_ms", server), ("search_ms", search))
    }
    print(table([summary]))
    print()
    print(table([{"latency": name, **{k: round(v, 1) for k, v in d.items()}} for name, d in latency.items()]))
    for e in errors[:5]:
        print("error:", e, file=sys.stderr)

    payload = {
        "target": args.url or str(args.index),
        "collection": health.get("stats"),
        "retriever": args.retriever,
        "k": args.k,
        "questions": {"file": str(args.questions), "distinct": len(questions)},
        "summary": summary,
        "latency": latency,
        "error_examples": errors[:20],
    }
    print(f"wrote {write_json(args.out, payload)}", file=sys.stderr)


if __name__ == "__main__":
    main()
