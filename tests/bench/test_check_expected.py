"""The reproduction checker: setups then commands, figures within tolerance pass, drift or a missing figure fails;
and every command in the shipped ``bench/expected.yaml`` names something that exists and parses."""

from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
EXPECTED = REPO / "bench" / "expected.yaml"


def _run(yaml_path: Path, *flags: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "bench.check_expected", "--file", str(yaml_path), *flags],
        cwd=REPO, capture_output=True, text=True, timeout=120,
    )


def _check(tmp_path: Path, got: float, expected: float, tolerance: float, path: list[str]) -> subprocess.CompletedProcess:
    out = tmp_path / "result.json"
    out.write_text(json.dumps({"results": {"bm25": {"ndcg@10": got}}}))
    spec = {"figures": [{"id": "x", "command": "python -c pass", "json": str(out), "path": path,
                         "expected": expected, "tolerance": tolerance}]}
    (tmp_path / "expected.yaml").write_text(yaml.safe_dump(spec))
    return _run(tmp_path / "expected.yaml", "--no-run")


def test_within_tolerance_passes(tmp_path: Path) -> None:
    r = _check(tmp_path, 0.676, 0.6762, 0.005, ["results", "bm25", "ndcg@10"])
    assert r.returncode == 0, r.stdout + r.stderr
    assert "1 ok, 0 drifted" in r.stdout


def test_drift_fails(tmp_path: Path) -> None:
    r = _check(tmp_path, 0.60, 0.6762, 0.005, ["results", "bm25", "ndcg@10"])
    assert r.returncode == 1
    assert "DRIFT" in r.stdout


def test_missing_figure_fails(tmp_path: Path) -> None:
    r = _check(tmp_path, 0.676, 0.6762, 0.005, ["results", "dense", "ndcg@10"])
    assert r.returncode == 1
    assert "missing" in r.stdout


def _logging_spec(tmp_path: Path) -> Path:
    """Two figures from two commands that share one setup; every step appends its name to ``log``."""
    log = tmp_path / "log"

    def step(name: str, writes: Path | None = None) -> str:
        code = f"open({str(log)!r}, 'a').write({name!r} + chr(10))"
        if writes is not None:
            code += f"; open({str(writes)!r}, 'w').write('{{\"m\": 0.5}}')"
        return shlex.join(["python", "-c", code])

    figures = []
    for i in (1, 2):
        out = tmp_path / f"r{i}.json"
        figures.append({"id": f"f{i}", "setup": step("setup"), "command": step(f"command{i}", out), "json": str(out),
                        "path": ["m"], "expected": 0.5, "tolerance": 0.01})
    figures.append({"id": "f3", "command": step("command2", tmp_path / "r2.json"), "json": str(tmp_path / "r2.json"),
                    "path": ["m"], "expected": 0.5, "tolerance": 0.01})
    path = tmp_path / "expected.yaml"
    path.write_text(yaml.safe_dump({"figures": figures}))
    return path


def test_setup_runs_once_before_the_commands(tmp_path: Path) -> None:
    r = _run(_logging_spec(tmp_path))
    assert r.returncode == 0, r.stdout + r.stderr
    assert (tmp_path / "log").read_text().split() == ["setup", "command1", "command2"]
    assert "3 ok, 0 drifted" in r.stdout


def test_no_run_runs_neither_setup_nor_commands(tmp_path: Path) -> None:
    r = _run(_logging_spec(tmp_path), "--no-run")
    assert r.returncode == 1  # nothing was written, so every figure is missing
    assert not (tmp_path / "log").exists()


def test_commands_lists_the_plan_and_runs_nothing(tmp_path: Path) -> None:
    r = _run(_logging_spec(tmp_path), "--commands")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert len(lines) == 3 and "setup" in lines[0] and "command1" in lines[1] and "command2" in lines[2]
    assert not (tmp_path / "log").exists()


def test_a_failing_setup_stops_the_run(tmp_path: Path) -> None:
    spec = {"figures": [{"id": "x", "setup": "python -c 'raise SystemExit(3)'", "command": "python -c pass",
                         "json": str(tmp_path / "r.json"), "path": ["m"], "expected": 0.5, "tolerance": 0.01}]}
    (tmp_path / "expected.yaml").write_text(yaml.safe_dump(spec))
    r = _run(tmp_path / "expected.yaml")
    assert r.returncode == 1 and "failed" in r.stderr


def test_python_and_hiera_resolve_next_to_the_interpreter(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(REPO))
    from bench.check_expected import argv_of

    assert argv_of("python -m bench.pooled") == [sys.executable, "-m", "bench.pooled"]
    assert argv_of("hiera eval d --set lam=1") == [str(Path(sys.executable).with_name("hiera")), "eval", "d", "--set", "lam=1"]


# -- the shipped file ---------------------------------------------------------------------------------------
def _figures() -> list[dict[str, Any]]:
    return yaml.safe_load(EXPECTED.read_text(encoding="utf-8"))["figures"]


def test_the_shipped_file_is_well_formed() -> None:
    figures = _figures()
    ids = [e["id"] for e in figures]
    assert len(ids) == len(set(ids)) >= 20
    for e in figures:
        for cmd in filter(None, (e.get("setup"), e["command"])):
            assert cmd.startswith(("python -m bench.", "hiera ")), cmd
        assert e["json"].startswith("bench/out/")
        assert 0 <= float(e["expected"]) <= 1 and 0 < float(e["tolerance"]) <= 0.02


def test_shipped_python_commands_name_bench_modules() -> None:
    """``python -m bench.X --flag ...``: bench/X.py exists and defines each flag the command passes."""
    for e in _figures():
        for cmd in filter(None, (e.get("setup"), e["command"])):
            argv = shlex.split(cmd)
            if argv[0] != "python":
                continue
            assert argv[1] == "-m" and argv[2].startswith("bench."), cmd
            module = REPO / "bench" / (argv[2].removeprefix("bench.").replace(".", "/") + ".py")
            assert module.is_file(), f"{e['id']}: {module} does not exist"
            source = module.read_text(encoding="utf-8")
            for flag in (a.split("=", 1)[0] for a in argv[3:] if a.startswith("--")):
                assert f'"{flag}"' in source, f"{e['id']}: {module.name} has no {flag}"


def _hiera_commands() -> list[tuple[str, list[str], dict[str, Any]]]:
    return [(e["command"], shlex.split(e["command"])[1:], e) for e in _figures() if e["command"].startswith("hiera ")]


def test_shipped_hiera_commands_parse() -> None:
    """Every ``hiera ...`` command parses with the CLI's own parser; its --set values check against the registry;
    an eval writes the JSON the entry reads, keyed by a retriever it ran."""
    from hiera.cli import build_parser
    from hiera.spec import parse_assignments

    commands = _hiera_commands()
    assert commands
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    for cmd, argv, e in commands:
        try:
            args = parser.parse_args(argv)
        except SystemExit:
            pytest.fail(f"{e['id']}: `{cmd}` does not parse")
        options = sub.choices[argv[0]]._option_string_actions  # exact names: argparse would accept an abbreviation
        for flag in (a.split("=", 1)[0] for a in argv[1:] if a.startswith("--")):
            assert flag in options, f"{e['id']}: hiera {argv[0]} has no option {flag}"
        if argv[0] != "eval":
            continue
        retrievers = [r for r in args.retrievers.split(",") if r]
        sets = [a for i, a in enumerate(argv[1:]) if argv[i] == "--set"]
        parse_assignments(sets, retrievers)  # raises on an unknown name or a bad value
        out = argv[argv.index("--out") + 1]
        assert e["json"] == f"{out}/results.json", e["id"]
        assert e["path"][0] in retrievers, e["id"]
        assert e.get("setup"), f"{e['id']}: an eval needs a setup that builds its collection"
