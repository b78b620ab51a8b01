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
