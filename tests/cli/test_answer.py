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


def test_eval_says_which_retrievers_it_does_not_read(squad_tiny, tiny_reader: Path, capsys) -> None:
    """``eval --reader`` reads passages: a documents-only retriever in the list is noted (evaluated, not read), and a
    list of only such retrievers is refused in one line."""
    root, qfile = squad_tiny
    base = ["eval", str(root), "--questions", str(qfile), "--format", "squad", "--ks", "1", "--latency-sample", "0",
            "--reader", str(tiny_reader), "--read-k", "1", "--json", "--limit", "3"]
    assert main([*base, "--retrievers", "bm25,bm25-doc"]) == 0
    captured = capsys.readouterr()
    metrics = json.loads(captured.out)
    assert "em@1" in metrics["bm25"] and "em@1" not in metrics["bm25-doc"]
    assert "note: bm25-doc ranks documents only: evaluated without the reader" in captured.err
    assert main([*base, "--retrievers", "bm25-doc"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--reader reads passages, and bm25-doc ranks documents only" in err


def test_answer_reranks_to_the_depth_asked(squad_tiny, tiny_reader: Path, reranker_dir: Path, capsys):
    """--rerank-depth means what it means on search, eval and serve: the first N are rescored, the rest kept."""
    root, qfile = squad_tiny
    q = load_squad(qfile, rules=RULES)[0]
    assert main(["answer", str(root), q.text, "--reader", str(tiny_reader), "-r", "bm25", "-k", "4", "--json",
                 "--rerank", str(reranker_dir), "--rerank-depth", "2"]) == 0
    out = json.loads(capsys.readouterr().out)
    (step,) = [s for s in out["trace"] if s["name"] == "rerank"]
    assert step["detail"]["depth"] == 2 and out["params"]["rerank_depth"] == 2 and len(out["passages"]) == 4


def test_eval_names_the_option_past_the_limit(squad_tiny, tiny_reader: Path, capsys):
    root, qfile = squad_tiny
    assert main(["eval", str(root), "--questions", str(qfile), "--format", "squad", "--retrievers", "bm25",
                 "--reader", str(tiny_reader), "--read-k", "1,1500", "-q"]) == 2
    assert "--read-k 1500 is larger than the limit 1000" in capsys.readouterr().err


def test_tune_reader_saves_the_calibrated_decoding_the_reader_then_uses(squad_tiny, tiny_reader: Path, tmp_path: Path,
                                                                       capsys):
    import shutil

    from hiera.read.model import META_FILE
    from hiera.read.reader import Reader

    root, qfile = squad_tiny
    reader = tmp_path / "reader"
    shutil.copytree(tiny_reader, reader)
    run = ["tune-reader", str(root), "--reader", str(reader), "--questions", str(qfile), "--format", "squad",
           "--retriever", "bm25", "--read-k", "1,3", "-q"]
    assert main([*run, "--dry-run"]) == 0
    dry = json.loads(capsys.readouterr().out)
    assert dry["saved"] is False and "decoding" not in json.loads((reader / META_FILE).read_text())
    assert main(run) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["saved"] is True and out["retriever"] == "bm25" and out["chosen"] == dry["chosen"]
    meta = json.loads((reader / META_FILE).read_text())
    assert meta["decoding"] == out["chosen"] and meta["decoding_calibration"]["read_ks"] == [1, 3]
    params = Reader(reader).params()
    assert {k: params[k] for k in out["chosen"]} == out["chosen"]  # the reader's defaults from now on
    # the EM the report gives for the chosen setting is what eval measures with the saved reader
    assert main(["eval", str(root), "--questions", str(qfile), "--format", "squad", "--retrievers", "bm25",
                 "--reader", str(reader), "--read-k", "1,3", "--ks", "3", "--latency-sample", "0", "--json",
                 "-q"]) == 0
    m = json.loads(capsys.readouterr().out)["bm25"]
    assert round(100 * m["em@1"], 2) == out["chosen_em"]["em@1"] and round(100 * m["em@3"], 2) == out["chosen_em"]["em@3"]
    for bad in ("5", "1,a", "0,5"):
        assert main([*run[:-3], "--read-k", bad, "-q"]) == 2
        assert "--read-k takes two or more positive read-ks" in capsys.readouterr().err
