"""bench.common's Report: rows and results recorded once, printed as a table, written as JSON."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def common(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    import bench.common as mod

    monkeypatch.setattr(mod, "OUT", tmp_path)
    return mod


def test_report_records_prints_and_writes(common, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    rep = common.Report("demo", ["retriever", "top1"])
    rep.add({"retriever": "bm25", "top1": 73.3, "extra": 1}, {"top1": 0.733})
    rep.add({"retriever": "dhr", "top1": 64.1}, {"top1": 0.641}, key="dhr lam=1", echo="dhr done")
    rep.add({"retriever": "note"}, echo=False)
    rep.print("title")
    out = capsys.readouterr().out
    assert "dhr done" in out and "title" in out and "| retriever | top1 |" in out and "extra" not in out.split("title")[1]
    path = rep.write(corpus={"documents": 3})
    data = json.loads(path.read_text())
    assert path == tmp_path / "demo.json"
    assert list(data) == ["machine", "corpus", "results", "rows"]
    assert data["results"] == {"bm25": {"top1": 0.733}, "dhr lam=1": {"top1": 0.641}}
    assert [r["retriever"] for r in data["rows"]] == ["bm25", "dhr", "note"]


def test_rows_only_report_has_no_results(common) -> None:
    rep = common.Report("x")
    rep.add({"stage": "mean", "ms": 1.0}, echo=False)
    assert rep.to_dict(queries=3) == {"queries": 3, "rows": [{"stage": "mean", "ms": 1.0}]}


def test_percent_and_tuned_params(common) -> None:
    assert common.percent({"top1": 0.73333, "top5": 0.9}, ("top1", "top5", "doc_top1")) == {
        "top1": 73.3, "top5": 90.0, "doc_top1": "–"}
    res = SimpleNamespace(params={"lam": 1.9, "top_docs": 20})
    assert common.tuned_params(res) == {"lam": 1.9, "top_docs": 20}
    assert common.label_params({"doc_stage": "hybrid-max", "lam": 1.9, "top_docs": 20}) == "lam=1.9 top_docs=20"
