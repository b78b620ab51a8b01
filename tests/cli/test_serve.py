"""``hiera serve``: its arguments, the exposure warning, and a real server process (graceful SIGTERM, the warning)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import httpx
import pytest
from helpers import API_KEY, BEE_SEARCH, free_port

from hiera.cli.serve import exposure_warning, is_loopback


def test_serve_command_is_registered_and_fails_cleanly(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from hiera.cli import build_parser, main

    args = build_parser().parse_args(["serve", str(tmp_path), "--port", "9", "--no-warmup"])
    assert (args.index, args.host, args.port, args.no_warmup) == (str(tmp_path), "127.0.0.1", 9, True)
    assert main(["serve", str(tmp_path / "missing")]) == 2
    assert "not a hiera collection" in capsys.readouterr().err


def test_exposure_warning() -> None:
    for host in ("127.0.0.1", "127.0.0.2", "::1", "[::1]", "localhost"):
        assert is_loopback(host) and exposure_warning(host, None) is None
    for host in ("0.0.0.0", "::", "192.168.1.5", "example.org"):
        assert not is_loopback(host)
        msg = exposure_warning(host, None)
        assert msg is not None and "without an API key" in msg and "\n" not in msg
        assert exposure_warning(host, API_KEY) is None


# -- a real server process ----------------------------------------------------------------------
SERVE = textwrap.dedent(
    """
    import sys, time
    from hiera.retrieve.bm25 import Bm25Retriever
    real = Bm25Retriever._search
    def slow(self, *a, **k):
        time.sleep(float(sys.argv[2]))
        return real(self, *a, **k)
    Bm25Retriever._search = slow
    from hiera.cli import main
    sys.exit(main(["serve", *sys.argv[3:], sys.argv[1]]))
    """
)


def _start(collection_dir: Path, delay: float, *args: str, env: dict | None = None) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", SERVE, str(collection_dir), str(delay), "--no-warmup", *args],
        stderr=subprocess.PIPE, text=True, env={**os.environ, **(env or {})},
    )


def _wait_up(proc: subprocess.Popen, url: str, headers: dict | None = None) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
        try:
            if httpx.get(url + "health", headers=headers, timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            time.sleep(0.1)
    pytest.fail("the server did not come up")


def test_sigterm_lets_the_in_flight_request_finish(collection_dir: Path) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}/"
    proc = _start(collection_dir, 1.5, "--port", str(port), "-q")
    try:
        _wait_up(proc, url)
        result: dict = {}
        th = threading.Thread(target=lambda: result.update(r=httpx.get(url + BEE_SEARCH.lstrip("/"), timeout=30)))
        th.start()
        time.sleep(0.5)  # the search is running now
        proc.send_signal(signal.SIGTERM)
        th.join(timeout=30)
        assert result["r"].status_code == 200 and result["r"].json()["hits"]
        # uvicorn finishes the request, shuts down, then re-raises SIGTERM: the exit is by that signal
        assert proc.wait(timeout=20) in (0, -signal.SIGTERM)
        assert "Traceback" not in (proc.stderr.read() if proc.stderr else "")
        with pytest.raises(httpx.ConnectError):
            httpx.get(url + "health", timeout=2)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_public_bind_without_key_warns(collection_dir: Path) -> None:
    port = free_port()
    proc = _start(collection_dir, 0, "--host", "0.0.0.0", "--port", str(port), "-q", env={"HIERA_API_KEY": ""})
    try:
        _wait_up(proc, f"http://127.0.0.1:{port}/")
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=20)
    err = proc.stderr.read() if proc.stderr else ""
    assert "hiera: warning: serving on 0.0.0.0 without an API key" in err
