"""The reproduction checker: figures within tolerance pass, drift or a missing figure fails."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import yaml

SCRIPT = Path(__file__).resolve().parents[2] / "bench" / "check_expected.py"


def _check(tmp_path: Path, got: float, expected: float, tolerance: float, path: list[str]) -> subprocess.CompletedProcess:
    out = tmp_path / "result.json"
    out.write_text(json.dumps({"results": {"bm25": {"ndcg@10": got}}}))
    spec = {"figures": [{"id": "x", "command": "python -c pass", "json": str(out), "path": path,
                         "expected": expected, "tolerance": tolerance}]}
    (tmp_path / "expected.yaml").write_text(yaml.safe_dump(spec))
    return subprocess.run(
        [sys.executable, str(SCRIPT), "--file", str(tmp_path / "expected.yaml"), "--no-run"],
        capture_output=True, text=True, timeout=60,
    )


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


def test_the_shipped_file_is_well_formed() -> None:
    spec = yaml.safe_load((SCRIPT.parent / "expected.yaml").read_text(encoding="utf-8"))
    ids = [e["id"] for e in spec["figures"]]
    assert len(ids) == len(set(ids)) >= 20
    for e in spec["figures"]:
        assert e["command"].startswith("python bench/") and e["json"].startswith("bench/out/")
        assert 0 <= float(e["expected"]) <= 1 and 0 < float(e["tolerance"]) <= 0.02
