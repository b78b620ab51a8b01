"""Package layering: serving builds on sharding, never the other way round."""

from __future__ import annotations

import ast
import pkgutil
from pathlib import Path

import hiera.shard


def _imported(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    imported = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    return imported | {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}


def test_shard_imports_nothing_from_serve() -> None:
    """Ray Serve's deployment lives in ``hiera.serve.ray``: the two packages used to import each other."""
    root = Path(hiera.shard.__file__).parent
    modules = [root / "__init__.py", *(root / f"{m.name}.py" for m in pkgutil.iter_modules([str(root)]))]
    assert len(modules) > 5
    for path in modules:
        assert not {m for m in _imported(path) if m == "hiera.serve" or m.startswith("hiera.serve.")}, path.name
