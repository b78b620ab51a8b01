"""The package's shape: no import cycles, no two rooms importing each other, no private names across packages.

import-linter (``make test`` runs ``lint-imports`` with the contracts in
pyproject.toml) enforces the layers; these tests read every import statement
of ``src/hiera`` themselves — at module level and inside functions, as
``import x``, ``from x import y`` and relative imports — so that a knot is
reported with the files that tie it, and the scanner is itself tested on
small packages written to disk.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
CORE = ("hiera.collection", "hiera.index", "hiera.check")


def modules(root: Path) -> dict[str, tuple[Path, bool]]:
    """Every module under ``root``: dotted name → (file, is a package)."""
    out = {}
    for p in root.rglob("*.py"):
        parts = list(p.relative_to(root).with_suffix("").parts)
        package = parts[-1] == "__init__"
        if package:
            parts = parts[:-1]
        out[".".join(parts)] = (p, package)
    return out


def imports(root: Path) -> dict[str, dict[str, list[str]]]:
    """importer → imported module → the names imported from it (``*`` for a plain ``import``)."""
    mods = modules(root)

    def resolve(name: str) -> str | None:
        while name and name not in mods:
            name = name.rpartition(".")[0]
        return name or None

    out: dict[str, dict[str, list[str]]] = {m: defaultdict(list) for m in mods}
    for mod, (path, package) in mods.items():
        here = mod if package else mod.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                for a in node.names:
                    target = resolve(a.name)
                    if target and target != mod:
                        out[mod][target].append("*")
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = here.split(".")
                    base = base[: len(base) - (node.level - 1)] if node.level > 1 else base
                    origin = ".".join(base + ([node.module] if node.module else []))
                else:
                    origin = node.module or ""
                for a in node.names:
                    full = f"{origin}.{a.name}"
                    target = full if full in mods else resolve(origin)
                    if target and target != mod:
                        out[mod][target].append("*" if target == full else a.name)
    return out


def cycles(graph: dict[str, dict[str, list[str]]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph.get(v, {}):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in list(graph):
        if v not in index:
            visit(v)
    return found


def room(module: str) -> str:
    """``hiera.X`` for any module under it (a top-level module is a room of its own)."""
    return ".".join(module.split(".")[:2])


def two_way_rooms(graph: dict[str, dict[str, list[str]]]) -> dict[tuple[str, str], list[str]]:
    edges: dict[tuple[str, str], list[str]] = defaultdict(list)
    for a, targets in graph.items():
        for b in targets:
            if room(a) != room(b):
                edges[(room(a), room(b))].append(f"{a} -> {b}")
    return {(a, b): edges[(a, b)] + edges[(b, a)] for (a, b) in edges if a < b and (b, a) in edges}


def private_crossings(graph: dict[str, dict[str, list[str]]]) -> list[str]:
    """``from pkg.mod import _name`` where the importer is not in ``pkg``."""
    out = []
    for a, targets in graph.items():
        for b, names in targets.items():
            if a.rpartition(".")[0] == b.rpartition(".")[0]:
                continue
            out += [f"{a} imports {b}.{n}" for n in names if n.startswith("_") and not n.startswith("__")]
    return out


@pytest.fixture(scope="module")
def graph() -> dict[str, dict[str, list[str]]]:
    return imports(SRC)


def test_no_import_cycle_between_files(graph) -> None:
    assert cycles(graph) == []


def test_no_two_rooms_import_each_other(graph) -> None:
    assert two_way_rooms(graph) == {}


def test_no_private_name_is_imported_from_another_package(graph) -> None:
    assert private_crossings(graph) == []


def test_the_core_imports_nothing_from_shard(graph) -> None:
    core = [m for m in graph if m.startswith(CORE)]
    assert len(core) >= 10  # the collection, every index module and the checker
    assert [f"{m} -> {t}" for m in core for t in graph[m] if t.startswith("hiera.shard")] == []


# -- the scanner itself, on packages written for the purpose -----------------------------------------------------
def write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


def test_the_scanner_sees_imports_inside_functions_and_relative_ones(tmp_path: Path) -> None:
    root = write(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/a/__init__.py": "",
        "pkg/a/x.py": "def f():\n    from pkg.b.y import g\n",
        "pkg/b/__init__.py": "",
        "pkg/b/y.py": "from ..a import x\ndef g(): pass\n",
    })
    g = imports(root)
    assert set(g["pkg.a.x"]) == {"pkg.b.y"} and set(g["pkg.b.y"]) == {"pkg.a.x"}
    assert cycles(g) == [["pkg.a.x", "pkg.b.y"]]
    assert list(two_way_rooms(g)) == [("pkg.a", "pkg.b")]


def test_the_scanner_reports_a_private_name_only_across_packages(tmp_path: Path) -> None:
    root = write(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/a/__init__.py": "",
        "pkg/a/x.py": "_secret = 1\n",
        "pkg/a/z.py": "from pkg.a.x import _secret\n",
        "pkg/b/__init__.py": "",
        "pkg/b/y.py": "from pkg.a.x import _secret\n",
    })
    assert private_crossings(imports(root)) == ["pkg.b.y imports pkg.a.x._secret"]


def test_a_clean_layered_package_passes(tmp_path: Path) -> None:
    root = write(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/low.py": "X = 1\n",
        "pkg/mid/__init__.py": "",
        "pkg/mid/m.py": "from pkg.low import X\n",
        "pkg/top.py": "import pkg.mid.m\nfrom pkg import low\n",
    })
    g = imports(root)
    assert cycles(g) == [] and two_way_rooms(g) == {} and private_crossings(g) == []
