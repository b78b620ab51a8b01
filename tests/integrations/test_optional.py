"""Without an extra, hiera works and the adapter that needs it says, in one line, which extra to install."""

from __future__ import annotations

import importlib
import sys

import pytest

from hiera.errors import HieraError

CASES = [
    ("hiera.integrations.langchain", "langchain_core", "pip install 'hiera[langchain]'"),
    ("hiera.integrations.llamaindex", "llama_index.core", "pip install 'hiera[llamaindex]'"),
    ("hiera.integrations.mcp", "mcp", "pip install 'hiera[mcp]'"),
]


def _uninstall(monkeypatch: pytest.MonkeyPatch, library: str, adapter: str) -> None:
    """``library`` as if it were not installed (its already-imported submodules too), the adapter not yet imported."""
    import hiera.integrations

    top = library.split(".")[0]
    for name in [n for n in sys.modules if n == top or n.startswith(top + ".")] + [library]:
        monkeypatch.setitem(sys.modules, name, None)  # what `import name` sees when it is not installed
    monkeypatch.delitem(sys.modules, adapter, raising=False)
    monkeypatch.delattr(hiera.integrations, adapter.rsplit(".", 1)[1], raising=False)


@pytest.mark.parametrize("module, library, hint", CASES)
def test_a_missing_library_is_a_one_line_error(module: str, library: str, hint: str,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    _uninstall(monkeypatch, library, module)
    with pytest.raises(ImportError) as e:
        importlib.import_module(module)
    assert hint in str(e.value) and "\n" not in str(e.value)
    importlib.import_module("hiera.integrations.source")  # the rest of hiera does not need it


def test_hiera_mcp_without_the_sdk(monkeypatch: pytest.MonkeyPatch, tmp_path, capsys) -> None:
    from hiera.cli import main

    _uninstall(monkeypatch, "mcp", "hiera.integrations.mcp")
    assert main(["mcp", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err == "hiera: error: hiera.integrations.mcp needs the mcp SDK: pip install 'hiera[mcp]'"


def test_the_client_without_httpx(monkeypatch: pytest.MonkeyPatch) -> None:
    from hiera.client import HieraClient

    monkeypatch.setitem(sys.modules, "httpx", None)
    with pytest.raises(HieraError, match=r"pip install 'hiera\[client\]'"):
        HieraClient()
