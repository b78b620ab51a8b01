"""The console entry point: a Ctrl-C at any moment ends in one line and status 130, never a traceback."""

from __future__ import annotations

import subprocess
import sys

import pytest

from hiera.cli import main

cli_main = sys.modules["hiera.cli.main"]  # the module: the package's ``main`` attribute is the function


def test_ctrl_c_while_the_command_modules_load() -> None:
    code = (
        "import sys\n"
        "class Stop:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'hiera.cli':\n"
        "            raise KeyboardInterrupt\n"
        "from hiera.__main__ import entry\n"
        "sys.meta_path.insert(0, Stop())\n"
        "sys.exit(entry())\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 130
    assert proc.stderr == "hiera: interrupted\n"


def test_ctrl_c_while_the_parser_is_built(monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    def interrupted() -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(cli_main, "build_parser", interrupted)
    assert main(["methods"]) == 130
    err = capsys.readouterr().err
    assert err.startswith("hiera: interrupted (what was done is kept") and "Traceback" not in err


def test_python_dash_m_runs_the_entry() -> None:
    proc = subprocess.run([sys.executable, "-m", "hiera", "--version"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and proc.stdout.startswith("hiera ")
