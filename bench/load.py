"""Concurrent clients against ``hiera serve`` on loopback: throughput and latency.

Starts its own server on 127.0.0.1 (a free port, a subprocess) for the given
collection, unless ``--url`` points at one already running; then N client
threads each send ``--requests`` GET /search?retriever=dhr requests with
varied SQuAD questions. Bounded in count and in wall time (``--max-seconds``);
stops by itself.

    python bench/load.py collections/demo --clients 8 --requests 200
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from common import data_dir, table, write_json  # noqa: E402


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def questions(limit: int = 2000) -> list[str]:
    path = data_dir() / "squad" / "dev-v1.1.first24.json"
    if not path.exists():
        return ["What is the capital of France?", "Who wrote Animal Farm?", "When did Apollo 11 land?"]
    data = json.loads(path.read_text(encoding="utf-8"))
    out = [qa["question"] for art in data["data"] for p in art["paragraphs"] for qa in p["qas"]]
    return out[:limit]


def wait_ready(url: str, timeout: float = 180.0) -> None:
    t = time.time()
    while time.time() - t < timeout:
        try:
            if httpx.get(url + "/health", timeout=5).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    raise SystemExit(f"server at {url} did not become ready in {timeout:.0f}s")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("collection", nargs="?", default="collections/demo")
    ap.add_argument("--url", default=None, help="use a running server instead of starting one")
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--requests", type=int, default=200, help="per client")
    ap.add_argument("--max-seconds", type=float, default=300.0)
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--retriever", default="dhr")
    args = ap.parse_args()

    server = None
    url = args.url
    if url is None:
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        server = subprocess.Popen(
            [sys.executable, "-m", "hiera", "serve", args.collection, "--host", "127.0.0.1", "--port", str(port)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env={**os.environ},
        )
    try:
        wait_ready(url)
        qs = questions()
        lat: list[float] = []
        errors: list[str] = []
        lock = threading.Lock()
        deadline = time.time() + args.max_seconds

        def client(cid: int) -> None:
            with httpx.Client(base_url=url, timeout=60) as c:
                for i in range(args.requests):
                    if time.time() > deadline:
                        return
                    q = qs[(cid * args.requests + i) % len(qs)]
                    t = time.perf_counter()
                    try:
                        r = c.get("/search", params={"q": q, "k": args.k, "retriever": args.retriever})
                        ok = r.status_code == 200 and r.json().get("hits") is not None
                        err = None if ok else f"HTTP {r.status_code}"
                    except httpx.HTTPError as e:
                        err = type(e).__name__
                    ms = (time.perf_counter() - t) * 1000
                    with lock:
                        (errors.append(err) if err else lat.append(ms))

        t0 = time.perf_counter()
        threads = [threading.Thread(target=client, args=(i,)) for i in range(args.clients)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        wall = time.perf_counter() - t0
    finally:
        if server is not None:
            server.terminate()
            server.wait(timeout=30)

    arr = np.array(lat) if lat else np.array([float("nan")])
    result = {
        "clients": args.clients,
        "requests": len(lat) + len(errors),
        "errors": len(errors),
        "seconds": wall,
        "throughput_rps": len(lat) / wall,
        "p50_ms": float(np.percentile(arr, 50)),
        "p95_ms": float(np.percentile(arr, 95)),
        "p99_ms": float(np.percentile(arr, 99)),
        "retriever": args.retriever,
        "collection": str(args.collection),
    }
    print(table([{k: (round(v, 1) if isinstance(v, float) else v) for k, v in result.items()}]))
    print(f"\nwrote {write_json('load', result)}")
    if errors:
        print(f"errors: {sorted(set(errors))}")


if __name__ == "__main__":
    main()
