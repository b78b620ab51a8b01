"""``hiera answer``, ``hiera eval --reader`` and ``hiera train-reader`` from the command line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from readdata import RULES

from hiera.cli import main
from hiera.eval.questions import load_squad


def test_answer_json_and_text(squad_tiny, tiny_reader: Path, capsys):
    root, qfile = squad_tiny
    q = load_squad(qfile, rules=RULES)[0]
    assert main(["answer", str(root), q.text, "--reader", str(tiny_reader), "-r", "bm25", "-k", "3", "--json",
                 "--set", "answers=2"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["question"] == q.text and len(out["passages"]) == 3 and 1 <= len(out["answers"]) <= 2
    a = out["answers"][0]
    passage = next(h for h in out["passages"] if h["passage_id"] == a["passage_id"])
    assert passage["text"][a["start"] : a["end"]] == a["text"]
    assert main(["answer", str(root), q.text, "--reader", str(tiny_reader), "-r", "bm25", "-k", "3"]) == 0
    text = capsys.readouterr().out
    assert f"[[{a['text']}]]" in text and "read" in text.splitlines()[0]


def test_eval_with_a_reader_reports_em_and_f1_per_read_k(squad_tiny, tiny_reader: Path, capsys, tmp_path: Path):
    root, qfile = squad_tiny
    assert main(["eval", str(root), "--questions", str(qfile), "--format", "squad", "--retrievers", "bm25",
                 "--ks", "1,5", "--reader", str(tiny_reader), "--read-k", "1,3", "--latency-sample", "0",
                 "--set", "max_answer_tokens=20", "--json", "-q"]) == 0
    m = json.loads(capsys.readouterr().out)["bm25"]
    for k in (1, 3):
        assert 0.0 <= m[f"em@{k}"] <= m[f"f1@{k}"] <= 1.0
    # the reader answers its own training questions from the passages BM25 ranks first
    assert m["em@1"] > 0.3
    assert m["latency_read_ms_p50"] > 0


@pytest.mark.parametrize(
    "argv,words",
    [
        (["--reader", "{missing}"], "no such reader directory"),
        (["--reader", "{root}"], "not a reader directory"),
        (["--reader", "{reader}", "--set", "max_answer_tokens=0"], "max_answer_tokens"),
        (["--reader", "{reader}", "-r", "bm25-doc"], "documents only"),
    ],
)
def test_bad_answer_input_is_one_line(squad_tiny, tiny_reader: Path, tmp_path: Path, capsys, argv, words):
    root, _ = squad_tiny
    fill = {"missing": str(tmp_path / "nope"), "root": str(root), "reader": str(tiny_reader)}
    args = ["answer", str(root), "who?", *[a.format(**fill) for a in argv]]
    if "-r" not in args:
        args += ["-r", "bm25"]
    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    assert words in err and len(err.splitlines()) == 1


def test_train_reader_resumes_from_its_checkpoint(squad_tiny, tmp_path: Path, capsys):
    root, qfile = squad_tiny
    out = tmp_path / "rd"
    base = ["train-reader", str(root), "--questions", str(qfile), "--format", "squad", "--out", str(out),
            "--batch-size", "4", "--max-length", "96", "--stride", "24", "--save-steps", "2", "-q"]
    assert main([*base, "--max-steps", "2"]) == 0
    first = json.loads(capsys.readouterr().out)
    assert first["train"]["steps"] == 2 and first["train"]["resumed_from"] is None
    assert main([*base, "--max-steps", "4"]) == 0
    second = json.loads(capsys.readouterr().out)
    assert second["train"]["steps"] == 4 and second["train"]["resumed_from"].endswith("checkpoint-2")
    assert json.loads((out / "hiera-reader.json").read_text())["train"]["steps"] == 4
    assert main([*base, "--max-steps", "2", "--stride", "60"]) == 2  # stride must stay below half a window
    assert "--stride" in capsys.readouterr().err
