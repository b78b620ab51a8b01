"""``hiera answer``: answers inside their passages, and one-line errors, with a reader trained on real SQuAD."""

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
    # the timings, then where the search ran, as `hiera search` prints them
    assert "answered-by" not in text.splitlines()[0] and text.splitlines()[1] == "answered by: BM25 on cpu"


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
