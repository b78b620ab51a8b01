"""The README's integration examples run as written (against the shared collection as ``coll/``)."""

from __future__ import annotations

import re
from pathlib import Path

import helpers
import pytest

README = Path(__file__).resolve().parents[2] / "README.md"


def _examples() -> list[str]:
    text = README.read_text(encoding="utf-8")
    section = text.split("### Where your application already is", 1)[1].split("\nBehaviour worth knowing", 1)[0]
    return re.findall(r"```python\n(.*?)```", section, flags=re.S)


@pytest.mark.parametrize("i, needs", [(0, "langchain_core"), (1, "llama_index.core"), (2, "httpx")])
def test_readme_example_runs(i: int, needs: str, shared_root: Path, server_url: str, tmp_path: Path,
                             monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    pytest.importorskip(needs, reason=f"the example needs {needs} (its hiera extra)")
    code = _examples()[i]
    (tmp_path / "coll").symlink_to(shared_root)
    monkeypatch.chdir(tmp_path)
    if "127.0.0.1:8000" in code:  # the README's `hiera serve coll/ --port 8000` is the test's server
        code = code.replace("http://127.0.0.1:8000", server_url)
    exec(compile(code, f"README example {i + 1}", "exec"), {})
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 5 and all(line.strip() for line in lines)
    titles = {d.title for d in helpers.make_docs()}
    assert all(any(t in line for t in titles) for line in lines)  # every hit printed with its breadcrumb
