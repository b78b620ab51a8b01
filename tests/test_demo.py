"""``hiera demo`` on a small real slice of its sources: the build's backend, the explained answers, the reuse."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

import pytest

import hiera.demo as demo
from hiera.backends import installed
from hiera.cli import main
from hiera.index.manifest import Manifest
from hiera.index.publish import live_build_dir


@pytest.fixture
def small_sources(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """40 real lead summaries (Albert Einstein among them) instead of the 10k the demo ingests."""
    from hiera.corpus.readers.ovos import ovos_summaries_path

    summaries = json.loads(ovos_summaries_path().read_text(encoding="utf-8"))
    keep = {"Albert Einstein", *random.Random(0).sample(sorted(summaries), 39)}
    path = tmp_path / "summaries.json"
    path.write_text(json.dumps({t: summaries[t] for t in sorted(keep) if t in summaries}), encoding="utf-8")
    monkeypatch.setattr(demo, "demo_sources", lambda: [([path], "ovos-summaries")])
    return path


def _backend(root: Path) -> str:
    return Manifest.read(live_build_dir(root)).models["passage"]["backend"]


@pytest.mark.skipif(not installed("onnx-int8"), reason="needs onnxruntime (hiera[fast])")
def test_demo_builds_with_int8_answers_with_dhr_and_reuses_its_build(small_sources: Path, tmp_path: Path, capsys):
    root = tmp_path / "demo"
    question = "Why did Einstein receive the Nobel Prize in Physics?"
    assert main(["demo", "--dir", str(root), "--question", question, "--k", "2"]) == 0
    out = capsys.readouterr().out
    assert _backend(root) == "onnx-int8"
    assert f"Q: {question}" in out and "1. Albert Einstein" in out
    assert "document ranked #" in out
    lines = re.findall(r"score ([\d.]+) = passage ([\d.]+) \+ λ ([\d.]+) × document ([\d.]+)", out)
    assert len(lines) == 2  # every score line adds up as printed
    for total, passage, lam, doc in lines:
        assert float(total) == pytest.approx(float(passage) + float(lam) * float(doc), abs=0.01)
    live = live_build_dir(root)
    assert main(["demo", "--dir", str(root), "--question", question]) == 0
    assert "building BM25" not in capsys.readouterr().out and live_build_dir(root) == live  # the marker: no rebuild


def test_demo_backend_is_chosen_and_bad_ones_refused(small_sources: Path, tmp_path: Path, capsys):
    root = tmp_path / "demo"
    assert main(["demo", "--dir", str(root), "--backend", "torch", "--question", "What is relativity?"]) == 0
    assert _backend(root) == "torch"
    if installed("onnx"):  # asked for another backend: the same documents, rebuilt
        assert main(["demo", "--dir", str(root), "--backend", "onnx", "--question", "What is relativity?"]) == 0
        assert _backend(root) == "onnx" and "rebuilding with onnx" in capsys.readouterr().out
    capsys.readouterr()
    assert main(["demo", "--dir", str(tmp_path / "other"), "--backend", "tensorrt"]) == 2
    err = capsys.readouterr().err.strip()
    assert "unknown encoder backend 'tensorrt'" in err and len(err.splitlines()) == 1
    assert not (tmp_path / "other").exists()


def test_an_article_both_sources_hold_is_one_document(small_sources: Path, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    """The demo's two sources share articles: each is merged, and no answer list shows a title twice.

    The second source holds the same 40 summaries (one of them with a sentence more) under other ids, as the
    XML dump holds the summaries' articles; a collection built before duplicates were merged is rebuilt.
    """
    entries = json.loads(small_sources.read_text(encoding="utf-8"))
    other = {t: {**e, "id": f"dump-{i}"} for i, (t, e) in enumerate(entries.items())}
    extra = "Einstein played the violin and loved the sonatas of Mozart."
    other["Albert Einstein"]["extract"] += "\n" + extra
    second = tmp_path / "dump.json"
    second.write_text(json.dumps(other), encoding="utf-8")
    monkeypatch.setattr(demo, "demo_sources", lambda: [([small_sources], "ovos-summaries"), ([second], "ovos-summaries")])
    root = tmp_path / "demo"
    question = "Why did Einstein receive the Nobel Prize in Physics?"
    assert main(["demo", "--dir", str(root), "--backend", "torch", "--question", question, "--k", "3"]) == 0
    out = capsys.readouterr().out
    assert f"{len(entries)} documents ({len(entries)} articles both sources hold, merged)" in out
    listed = [m.group(1).split(" › ")[0] for m in re.finditer(r"^  \d+\. (.+)$", out, flags=re.M)]
    assert listed and len(listed) == len(set(listed)) and listed[0] == "Albert Einstein"

    from hiera.corpus.store import CorpusStore

    store = CorpusStore(root)
    einstein = store.get_document("dump-" + str(list(other).index("Albert Einstein")))
    assert einstein.id == "albert-einstein" and einstein.sections[-1].paragraphs == [extra]

    # a demo collection from before: its marker does not say duplicates were merged, so it is rebuilt
    (root / "demo.json").write_text(json.dumps({"sources": []}), encoding="utf-8")
    assert main(["demo", "--dir", str(root), "--backend", "torch", "--question", question]) == 0
    assert "holds duplicate articles" in capsys.readouterr().out
    assert CorpusStore(root).stats()["merged"] == len(entries)
