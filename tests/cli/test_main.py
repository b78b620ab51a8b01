"""The ``hiera`` entry point: one-line errors (exit 2) for every kind of bad input, and a light ``--help``."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import run_cli


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["search", "{root}", "   "], "empty"),
        (["search", "{root}", "q", "-k", "0"], "k must be"),
        (["search", "{root}", "q", "--set", "lambda=-1"], "lambda (= lam)=-1"),
        (["search", "{root}", "q", "--set", "fusion=rrf"], "no parameter 'fusion' in dhr"),
        (["search", "{root}", "q", "--set", "lam"], "NAME=VALUE"),
        (["search", "{root}", "q", "-r", "hybrid", "--set", "fusion=max"], "fusion=max must be one of rrf, interp"),
        (["eval", "{root}", "--questions", "{missing}", "--format", "squad", "--set", "doc_alpha=2"], "doc_alpha=2"),
        (["search", "{missing}", "q"], "not a hiera collection"),
        (["stats", "{missing}"], "not a hiera collection"),
        (["search", "{root}", "q", "--passage-encoder", "{missing}"], "not a local directory"),
        (["ingest", "{missing}", "--format", "hiera-jsonl", "--index", "{file}"], "is a file, not a collection"),
        (["eval", "{root}", "--questions", "{missing}", "--format", "squad", "--out", "{file}"],
         "--out {file}: a file is in the way"),
        (["eval", "{root}", "--questions", "{empty}", "--format", "squad", "--retrievers", "bm25"], "no questions in it"),
    ],
)
def test_user_errors_are_one_line(shared_root: Path, tmp_path: Path, capsys, argv: list[str], needle: str) -> None:
    (tmp_path / "afile").write_text("not a directory\n")
    (tmp_path / "empty.json").write_text('{"data": []}\n')
    names = {"root": shared_root, "missing": tmp_path / "missing", "file": tmp_path / "afile",
             "empty": tmp_path / "empty.json"}
    args = [a.format(**names) for a in argv]
    needle = needle.format(**names)
    rc, out, err = run_cli(capsys, *args)
    assert rc == 2
    assert out == ""
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("hiera: error: ") and needle in lines[0]


def test_commands_other_than_serve_do_not_import_fastapi() -> None:
    """``hiera serve`` registers with every command: its defaults must come without FastAPI (~0.4 s to import)."""
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from hiera.cli import main\n"
        "try:\n"
        "    main(['--help'])\n"
        "except SystemExit:\n"
        "    pass\n"
        "assert 'fastapi' not in sys.modules, 'fastapi imported'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, timeout=120)


@pytest.mark.parametrize("argv", [["methods"], ["methods", "--json"]])
def test_a_reader_that_stops_reading_ends_the_command_quietly(argv: list[str]) -> None:
    """``hiera methods | head -1``: the pipe closes before the output is written; no traceback, SIGPIPE's status."""
    import subprocess
    import sys

    p = subprocess.Popen([sys.executable, "-m", "hiera", *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    p.stdout.close()  # gone before the child writes its first line: every write of it meets a closed pipe
    _, err = p.communicate(timeout=120)
    assert err.decode() == "" and p.returncode == 141, (p.returncode, err.decode()[-500:])


def test_zero_shards_is_refused_not_read_as_unsharded(tmp_path: Path, capsys) -> None:
    with pytest.raises(SystemExit) as exc:
        run_cli(capsys, "build", str(tmp_path / "missing"), "--shards", "0")
    assert exc.value.code == 2 and "argument --shards: must be >= 1, got 0" in capsys.readouterr().err
