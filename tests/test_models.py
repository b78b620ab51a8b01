"""The process environment hiera sets up before model libraries load."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from hiera.cli import main
from hiera.models import passive_threads


def test_the_cli_lets_idle_openmp_threads_sleep(monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    assert main(["methods"]) == 0
    assert os.environ["OMP_WAIT_POLICY"] == "PASSIVE"


def test_an_explicit_wait_policy_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OMP_WAIT_POLICY", "ACTIVE")
    assert passive_threads() == {"OMP_WAIT_POLICY": "ACTIVE"}


def test_the_policy_is_set_before_torch_loads() -> None:
    """OpenMP runtimes read the variable once, at load: the entry point must set it with torch not yet imported."""
    code = (
        "import os, sys\n"
        "os.environ.pop('OMP_WAIT_POLICY', None)\n"
        "import hiera.models as m\n"
        "orig = m.passive_threads\n"
        "def spy():\n"
        "    assert 'torch' not in sys.modules and 'faiss' not in sys.modules\n"
        "    return orig()\n"
        "m.passive_threads = spy\n"
        "from hiera.cli import main\n"
        "main(['methods'])\n"
        "assert os.environ['OMP_WAIT_POLICY'] == 'PASSIVE'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, timeout=120)
