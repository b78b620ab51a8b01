"""spaCy in a second process: a cold ``hiera search -r linking`` parses there while this process opens the build.

Importing spaCy and building its pipeline cost ≈ 1.3 s of pure-Python work;
in a thread beside the query encoder they hold the GIL and overlap nothing.
A child process started first thing on the other core overlaps them with
everything else a cold call does (imports, opening the build, loading the
encoder). Texts go down a pipe as JSON lines and come back as
:class:`~hiera.link.parsed.Parsed` (plain data), so the rules read the same
values either way.

Protocol, one JSON object per line: ``{"id": n, "text": ...}`` in, ``{"id": n,
"parsed": ...}`` or ``{"id": n, "error": "one line"}`` out, in order. The
child exits when its stdin closes, so a parent that dies takes it along.

Only a one-shot process should start one (the CLI does); a server loads spaCy
in-process once and keeps it.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import types
import weakref
from typing import Any

from hiera.errors import HieraError
from hiera.link.parsed import Parsed


class WorkerGone(RuntimeError):
    """The child stopped answering (killed, crashed): the caller parses in-process instead."""


class ParseProcess:
    """A child process holding spaCy's pipeline ``name``; thread-safe, answers in the order asked."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._proc: subprocess.Popen[str] | None = subprocess.Popen(
            [sys.executable, "-m", "hiera.link.parse_worker", name],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, bufsize=1,
        )
        self._lock = threading.Lock()
        self._sent = 0
        self._replies: dict[int, dict[str, Any]] = {}
        self._finalizer = weakref.finalize(self, _stop, self._proc)

    @property
    def alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def submit(self, text: str) -> int:
        """Send ``text`` to be parsed now; :meth:`result` with the returned id collects it (the child works meanwhile)."""
        with self._lock:
            proc = self._live()
            self._sent += 1
            try:
                proc.stdin.write(json.dumps({"id": self._sent, "text": text}) + "\n")  # type: ignore[union-attr]
                proc.stdin.flush()  # type: ignore[union-attr]
            except (OSError, ValueError) as e:
                self._close_locked()
                raise WorkerGone(f"the parse worker is gone ({e})") from None
            return self._sent

    def result(self, rid: int) -> Parsed:
        """The parse sent as ``rid``; what failed in the child is a :class:`HieraError` (its one line), a dead child
        :class:`WorkerGone`. Replies come in the order sent; others read on the way are kept for their callers."""
        with self._lock:
            while rid not in self._replies:
                proc = self._live()
                try:
                    line = proc.stdout.readline()  # type: ignore[union-attr]
                except (OSError, ValueError) as e:
                    line = f"closed: {e}"
                if not line.startswith("{"):
                    self._close_locked()
                    raise WorkerGone(f"the parse worker exited ({line.strip() or 'no reply'})")
                reply = json.loads(line)
                self._replies[reply["id"]] = reply
            reply = self._replies.pop(rid)
        if "error" in reply:
            raise HieraError(reply["error"])
        return Parsed.from_dict(reply["parsed"])

    def parse(self, text: str) -> Parsed:
        return self.result(self.submit(text))

    def _live(self) -> subprocess.Popen[str]:
        if self._proc is None or self._proc.stdin is None or self._proc.stdout is None:
            raise WorkerGone("the parse worker was closed")
        return self._proc

    def close(self) -> None:
        with self._lock:
            self._close_locked()

    def _close_locked(self) -> None:
        if self._proc is not None:
            self._finalizer()
            self._proc = None


def _stop(proc: subprocess.Popen[str]) -> None:
    for f in (proc.stdin, proc.stdout):
        if f is not None:
            try:
                f.close()
            except OSError:
                pass
    if proc.poll() is None:
        proc.kill()
        proc.wait()


def serve(name: str, stdin: Any = sys.stdin, stdout: Any = sys.stdout) -> None:
    """The child's loop: load once (errors are answered per request, one line each), parse until stdin closes."""
    from hiera.link.spacyload import load_spacy

    try:
        nlp, error = load_spacy(name), None
    except HieraError as e:  # a missing spaCy or model: said once per request, as in-process
        nlp, error = None, str(e)
    for line in stdin:
        reply: dict[str, Any] = {"id": None}
        try:
            request = json.loads(line)
            reply["id"] = request["id"]
            if nlp is None:
                raise RuntimeError(error)
            reply["parsed"] = Parsed.from_spacy(nlp(request["text"])).to_dict()
        except Exception as e:  # noqa: BLE001 - one bad request must not end the worker
            reply["error"] = (str(e).splitlines() or [type(e).__name__])[0]
        stdout.write(json.dumps(reply) + "\n")
        stdout.flush()


def _without_spacy_cli() -> None:
    """Stand in an empty ``spacy.cli`` in this dedicated child, which never runs spaCy's command line.

    ``import spacy`` imports its CLI for one re-export (``spacy.info``), and
    with it typer, weasel, requests and httpx: ≈ 0.2 s of the child's ≈ 1.3 s
    start, which a cold linking call waits on. Never done in a user's
    process; the parses are tested equal to in-process ones.
    """
    if "spacy" in sys.modules:
        return

    def info(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError("spaCy's CLI is not loaded in hiera's parse worker")

    cli, cli_info = types.ModuleType("spacy.cli"), types.ModuleType("spacy.cli.info")
    cli.info = cli_info.info = info  # type: ignore[attr-defined]
    sys.modules.update({"spacy.cli": cli, "spacy.cli.info": cli_info})


if __name__ == "__main__":
    protocol = sys.stdout
    sys.stdout = sys.stderr  # whatever a library prints must not break the protocol
    _without_spacy_cli()
    serve(sys.argv[1], sys.stdin, protocol)
