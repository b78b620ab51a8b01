"""Atomic writes (hiera.io): the old file or the new one, never half, never a stray temporary file."""

from __future__ import annotations

import json

import pytest

from hiera.io import write_atomic, write_json_atomic


def test_failed_write_keeps_the_old_file_and_leaves_nothing(tmp_path):
    target = tmp_path / "meta.json"
    write_json_atomic(target, {"v": 1})

    def broken(tmp):
        tmp.write_text('{"v": 2, "half')
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        write_atomic(target, broken)
    assert json.loads(target.read_text()) == {"v": 1}
    assert [p.name for p in tmp_path.iterdir()] == ["meta.json"]


def test_two_writers_of_one_target_never_share_a_temporary_file(tmp_path):
    """A writer that starts while another is mid-write (another process, a signal handler) gets its own file."""
    target = tmp_path / "report.json"
    seen = []

    def outer(tmp):
        tmp.write_text('{"writer": "outer", ')
        write_json_atomic(target, {"writer": "inner"})  # lands while the outer file is half written
        seen.append(tmp.read_text())
        with open(tmp, "a") as fh:
            fh.write('"done": true}')

    write_atomic(target, outer)
    assert seen == ['{"writer": "outer", ']  # the inner writer did not truncate or overwrite it
    assert json.loads(target.read_text()) == {"writer": "outer", "done": True}  # the last rename wins, whole
    assert [p.name for p in tmp_path.iterdir()] == ["report.json"]


_RACE = r"""
import gc, json, os, sys, tempfile, threading
import numpy as np
from hiera.io import load_npy
sys.setswitchinterval(1e-6)  # switch threads as often as possible: the race needs a switch inside ast's conversion
d = tempfile.mkdtemp()
paths = [os.path.join(d, f"a{i}.npy") for i in range(5)]
for p in paths:
    np.save(p, np.zeros((2, 384), np.float16))

class Cycle:
    def __del__(self):  # a Python finalizer run by the collector: a point where another thread may take over
        self.x = [0] * 10

def run(load):
    errors = []
    def work():
        junk = []
        for _ in range(400):
            for p in paths:
                try:
                    load(p)
                except SystemError as e:
                    errors.append(str(e))
                c = Cycle(); c.me = c; junk.append(c)
                if len(junk) > 50:
                    junk.clear()
    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads: t.start()
    for t in threads: t.join()
    return len(errors)

print(json.dumps({"np.load": run(lambda p: np.load(p, mmap_mode="r")), "load_npy": run(lambda p: load_npy(p, mmap=True))}))
"""


def test_npy_loads_in_many_threads_never_race_in_the_ast_parser() -> None:
    """numpy parses .npy headers with ast, which CPython < 3.11.8 cannot do in two threads at once (gh-106905):
    the shards' parallel warm-up failed CI that way. load_npy never does."""
    import json
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", _RACE], capture_output=True, text=True, check=True, timeout=300)
    errors = json.loads(done.stdout.strip().splitlines()[-1])
    assert errors["load_npy"] == 0
    if sys.version_info[:3] < (3, 11, 8) and sys.version_info[:2] == (3, 11) and errors["np.load"] == 0:
        # the control: on this CPython the race is real, but timing-dependent; a run where plain np.load did not
        # hit it either shows nothing about load_npy, so it says so instead of passing
        pytest.skip("the ast race did not show for plain np.load in this run: inconclusive")
