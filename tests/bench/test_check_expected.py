"""The reproduction checker: setups then commands, figures within tolerance pass, drift or a missing figure fails;
claims (comparisons of figures) pass or fail the run the same way, and a malformed one is refused at load; every
command in the shipped ``bench/expected.yaml`` names something that exists and parses, and every shipped claim
quotes its README and holds on the recorded values."""

from __future__ import annotations

import argparse
import json
import re
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


def test_a_scale_reads_a_json_of_percentages_as_fractions(tmp_path: Path) -> None:
    out = tmp_path / "result.json"
    out.write_text(json.dumps({"recipes": [{"rc_em": 57.07}]}))
    row = {"id": "x", "command": "python -c pass", "json": str(out), "path": ["recipes", 0, "rc_em"],
           "expected": 0.5707, "tolerance": 0.005}
    for scale, code in ((0.01, 0), (1, 1)):  # unscaled, 57.07 is no fraction near 0.5707
        (tmp_path / "expected.yaml").write_text(yaml.safe_dump({"figures": [{**row, "scale": scale}]}))
        r = _run(tmp_path / "expected.yaml", "--no-run")
        assert r.returncode == code, r.stdout + r.stderr
    (tmp_path / "expected.yaml").write_text(yaml.safe_dump({"figures": [{**row, "scale": "percent"}]}))
    r = _run(tmp_path / "expected.yaml", "--no-run")
    assert r.returncode == 2 and "scale must be a positive number" in r.stderr


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


def test_python_and_hiera_resolve_next_to_the_interpreter() -> None:
    from bench.check_expected import argv_of

    assert argv_of("python -m bench.pooled") == [sys.executable, "-m", "bench.pooled"]
    assert argv_of("hiera eval d --set lam=1") == [str(Path(sys.executable).with_name("hiera")), "eval", "d", "--set", "lam=1"]


# -- claims ---------------------------------------------------------------------------------------------------
def _claims_spec(tmp_path: Path, values: dict[str, float], claims: list[dict[str, Any]], **json_of: str) -> Path:
    """One figure per entry of ``values`` (expected = the value, so none drifts), each from its own command and
    reading ``results.json`` (``json_of`` moves a figure to another file); ``claims`` as given."""
    files: dict[str, dict[str, float]] = {}
    figures = []
    for fid, v in values.items():
        name = json_of.get(fid, "results.json")
        files.setdefault(name, {})[fid] = v
        figures.append({"id": fid, "command": f"python -c 'print({fid!r})'", "json": str(tmp_path / name),
                        "path": [fid], "expected": v, "tolerance": 0.01})
    for name, data in files.items():
        (tmp_path / name).write_text(json.dumps(data))
    path = tmp_path / "expected.yaml"
    path.write_text(yaml.safe_dump({"figures": figures, "claims": claims}, sort_keys=False))
    return path


def _row(stdout: str, row_id: str) -> list[str]:
    """The cells of the table row whose id is ``row_id``."""
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in stdout.splitlines() if line.startswith("|")]
    return next(r for r in rows if r[0] == row_id)


SINGLES = {"linking": 0.75, "bm25": 0.60, "dense": 0.72, "hybrid": 0.65}
OVER_BEST = {"id": "linking/claim/over-best-single",
             "difference": ["linking", {"max_of": ["bm25", "dense", "hybrid"]}]}


def test_a_claim_that_holds_passes(tmp_path: Path) -> None:
    spec = _claims_spec(tmp_path, SINGLES, [{"id": "c/ahead", "difference": ["linking", "bm25"], "at_least": 0.05}])
    r = _run(spec, "--no-run")
    assert r.returncode == 0, r.stdout + r.stderr
    assert _row(r.stdout, "c/ahead") == ["c/ahead", "≥ 0.05", "claim", "0.15", "ok"]
    assert "5 ok, 0 drifted, 0 of 1 claims failed" in r.stdout


def test_a_claim_that_does_not_hold_fails_the_run(tmp_path: Path) -> None:
    spec = _claims_spec(tmp_path, SINGLES, [{"id": "c/ahead", "difference": ["linking", "bm25"], "at_least": 0.2}])
    r = _run(spec, "--no-run")
    assert r.returncode == 1
    assert _row(r.stdout, "c/ahead")[-1] == "FAIL"
    assert "4 ok, 0 drifted, 1 of 1 claims failed" in r.stdout  # every figure is where it should be: the claim fails


def test_max_of_compares_with_the_best_operand(tmp_path: Path) -> None:
    """linking − max(bm25, dense, hybrid) is 0.75 − 0.72 (dense, not the first operand)."""
    r = _run(_claims_spec(tmp_path, SINGLES, [{**OVER_BEST, "at_least": 0.03}]), "--no-run")
    assert r.returncode == 0, r.stdout + r.stderr
    assert _row(r.stdout, OVER_BEST["id"])[3] == "0.03"
    r = _run(_claims_spec(tmp_path, SINGLES, [{**OVER_BEST, "at_least": 0.05}]), "--no-run")
    assert r.returncode == 1 and _row(r.stdout, OVER_BEST["id"])[-1] == "FAIL"


def test_a_claim_over_a_missing_figure_fails(tmp_path: Path) -> None:
    spec = _claims_spec(tmp_path, SINGLES, [{**OVER_BEST, "at_least": 0.0}])
    (tmp_path / "results.json").write_text(json.dumps({k: v for k, v in SINGLES.items() if k != "dense"}))
    r = _run(spec, "--no-run")
    assert r.returncode == 1
    assert _row(r.stdout, OVER_BEST["id"])[3:] == ["missing (dense)", "FAIL"]


def test_only_selects_a_claim_with_the_figures_it_reads(tmp_path: Path) -> None:
    claims = [{**OVER_BEST, "at_least": 0.0}, {"id": "other/claim", "difference": ["bm25", "hybrid"], "at_most": 0}]
    spec = _claims_spec(tmp_path, {**SINGLES, "unrelated": 0.5}, claims, unrelated="other.json")
    r = _run(spec, "--no-run", "--only", "linking/claim")
    assert r.returncode == 0, r.stdout + r.stderr
    ids = [line.split("|")[1].strip() for line in r.stdout.splitlines() if line.startswith("| ")][1:]
    assert ids == ["linking", "bm25", "dense", "hybrid", OVER_BEST["id"]]
    r = _run(spec, "--commands", "--only", "linking/claim")
    assert r.returncode == 0 and [c.split("(")[1] for c in r.stdout.splitlines()] == [
        "'linking')'", "'bm25')'", "'dense')'", "'hybrid')'"]
    r = _run(spec, "--no-run", "--only", "other/")
    assert r.returncode == 0 and "other/claim" in r.stdout and OVER_BEST["id"] not in r.stdout


@pytest.mark.parametrize(("claim", "message"), [
    ({"id": "c", "difference": ["linking", "nope"], "at_least": 0}, "claim c: unknown figure id 'nope'"),
    ({"id": "c", "difference": ["linking", {"max_of": ["bm25", "nope"]}], "at_least": 0}, "unknown figure id 'nope'"),
    ({"id": "c", "difference": ["linking", "bm25", "dense"], "at_least": 0}, "difference needs two operands"),
    ({"id": "c", "max_of": ["linking"], "at_least": 0}, "max_of needs a list of at least two operands"),
    ({"id": "c", "difference": ["linking", "bm25"]}, "states no bound"),
    ({"id": "c", "difference": ["linking", "bm25"], "at_leats": 0}, "unknown key(s) at_leats"),
    ({"id": "c", "difference": ["linking", "bm25"], "at_least": "0.05"}, "at_least must be a number"),
    ({"id": "c", "difference": ["linking", "bm25"], "max_of": ["bm25", "dense"], "at_least": 0}, "exactly one of"),
    ({"id": "bm25", "difference": ["linking", "bm25"], "at_least": 0}, "claim bm25: duplicate id"),
])
def test_a_malformed_claim_is_refused_before_anything_runs(tmp_path: Path, claim: dict[str, Any], message: str) -> None:
    spec = _claims_spec(tmp_path, SINGLES, [claim])
    (tmp_path / "results.json").unlink()
    r = _run(spec)  # a plain run: it would execute the figures' commands if the file got past loading
    assert r.returncode == 2 and r.stdout == ""
    assert len(r.stderr.strip().splitlines()) == 1 and message in r.stderr, r.stderr


def test_bounds_and_nested_forms() -> None:
    from bench.check_expected import bound_text, holds, value_of

    values = {"a": 0.954, "b": 0.958, "c": 0.5}
    assert value_of({"difference": ["a", "b"]}, values) == -0.004  # not −0.0040000000000000036
    assert value_of({"difference": [{"min_of": ["a", "b"]}, "c"]}, values) == 0.454
    within = {"at_least": -0.005, "at_most": 0.005}
    assert holds(within, -0.004) and not holds(within, -0.006) and bound_text(within) == "≥ -0.005 and ≤ 0.005"
    assert holds({"at_least": 0}, 0.0) and not holds({"more_than": 0}, 0.0)
    assert holds({"less_than": 0}, -0.03) and not holds({"less_than": 0}, 0.0)


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
        unit = e.get("unit", "fraction")
        assert unit in ("fraction", "ratio"), f"{e['id']}: unit {unit!r}"  # speed: a within-run ratio
        assert "device" not in e or isinstance(e["device"], str) and e["device"], f"{e['id']}: device must name one"
        if unit == "fraction":
            assert 0 <= float(e["expected"]) <= 1, e["id"]
        assert 0 <= float(e["tolerance"]) <= 0.02, e["id"]
        if float(e["expected"]) in (0.0, 1.0) and e["id"].endswith("_fraction"):
            assert float(e["tolerance"]) == 0, f"{e['id']}: a zero-failure target is exact"


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
                # a flag may be spelt with a shared prefix (bench.ray_faults' f"--{prefix}build-trials")
                assert f'"{flag}"' in source or f'"--{{prefix}}{flag[2:]}"' in source, f"{e['id']}: {module.name} has no {flag}"


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


def _normalized(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def test_shipped_claims_quote_their_readme_and_hold_on_the_expected_values() -> None:
    """Every claim is well-formed (load validates it), reads two figures or more, quotes a sentence of README.md or
    bench/README.md word for word, and holds on the figures' recorded ``expected:`` values: the file agrees with
    itself, without running a benchmark."""
    from bench.check_expected import bound_text, expression, figures_of, holds, load, value_of

    figures, claims = load(EXPECTED)
    assert len(claims) >= 20
    expected = {e["id"]: float(e["expected"]) for e in figures}
    readmes = {name: _normalized((REPO / name).read_text(encoding="utf-8")) for name in ("README.md", "bench/README.md")}
    for c in claims:
        source, _, quote = c.get("says", "").partition(": ")
        assert source in readmes and quote, f"{c['id']}: says must be 'README.md: …' or 'bench/README.md: …'"
        assert _normalized(quote.strip('"')) in readmes[source], f"{c['id']}: not in {source}: {quote}"
        assert len(figures_of(expression(c))) >= 2, c["id"]
        value = value_of(expression(c), expected)
        assert holds(c, value), f"{c['id']}: {value} is not {bound_text(c)}"


def test_rows_of_another_device_are_compared_only_on_that_device(tmp_path: Path) -> None:
    """A GPU figure is never re-run or compared on the CPU machine, nor is a claim that reads it; ``--device`` NAME
    compares exactly the rows recorded there."""
    spec = _claims_spec(tmp_path, {"cpu_row": 0.5, "gpu_row": 0.9},
                        [{"id": "c/gpu-over-cpu", "difference": ["gpu_row", "cpu_row"], "more_than": 0}])
    data = yaml.safe_load(spec.read_text())
    data["figures"][1]["device"] = "nvidia-h100"
    spec.write_text(yaml.safe_dump(data, sort_keys=False))
    (tmp_path / "results.json").write_text(json.dumps({"cpu_row": 0.5}))  # the GPU's JSON is not on this machine
    r = _run(spec, "--no-run")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "gpu_row" not in r.stdout and "c/gpu-over-cpu" not in r.stdout and "1 ok, 0 drifted" in r.stdout
    (tmp_path / "results.json").write_text(json.dumps({"gpu_row": 0.9}))
    r = _run(spec, "--no-run", "--device", "nvidia-h100")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "cpu_row" not in r.stdout and "gpu_row" in r.stdout
