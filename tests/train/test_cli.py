"""``hiera train`` → ``hiera build --passage-encoder`` → ``hiera search/eval --rerank``, end to end."""

from __future__ import annotations

import json
from pathlib import Path

import helpers
import pytest

from hiera.cli import main


def _run(capsys, *argv: str) -> tuple[int, str, str]:
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


@pytest.fixture(scope="module")
def questions_file(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("q") / "train.jsonl"
    path.write_text(
        "\n".join(json.dumps({"question": q.text, "answer": q.answers}) for q in helpers.tiny_questions())
    )
    return path


def test_train_build_search_eval(shared_root, questions_file, tmp_path, capsys):
    root = helpers.copy_collection(shared_root, tmp_path / "col")
    model = tmp_path / "models" / "passage"
    rc, out, err = _run(
        capsys,
        "train",
        str(root),
        "--questions",
        str(questions_file),
        "--format",
        "nq-open",
        "--out",
        str(model),
        "--negatives",
        "in-batch,bm25,in-sec",
        "--max-steps",
        "1",
        "--batch-size",
        "4",
        "-q",
    )
    assert rc == 0, err
    assert json.loads(out)["iterations"][0]["steps"] == 1 and (model / "hiera-train.json").exists()
    reranker = tmp_path / "models" / "rr"
    rc, out, err = _run(
        capsys,
        "train-reranker",
        str(root),
        "--questions",
        str(questions_file),
        "--format",
        "nq-open",
        "--out",
        str(reranker),
        "--max-steps",
        "1",
        "--batch-size",
        "4",
        "-q",
    )
    assert rc == 0, err
    assert 0 <= json.loads(out)["threshold"] <= 1

    rc, _, err = _run(capsys, "build", str(root), "--passage-encoder", str(model), "-q")
    assert rc == 0, err
    manifest = json.loads((root / "index" / "manifest.json").read_text())
    assert manifest["models"]["passage"]["path"] == str(model)
    assert manifest["models"]["doc"]["path"] != str(model)

    rc, out, err = _run(
        capsys,
        "search",
        str(root),
        "Which piece moves in an L shape?",
        "-r",
        "dense",
        "--rerank",
        str(reranker),
        "--rerank-depth",
        "5",
        "-k",
        "3",
        "--json",
    )
    assert rc == 0, err
    res = json.loads(out)
    assert res["retriever"] == "dense+rerank" and len(res["hits"]) == 3
    assert {"passage", "retrieve", "rerank"} <= set(res["hits"][0]["stages"])

    rc, out, err = _run(
        capsys,
        "eval",
        str(root),
        "--questions",
        str(questions_file),
        "--format",
        "nq-open",
        "--retrievers",
        "bm25",
        "--rerank",
        str(reranker),
        "--k",
        "1,5",
        "--json",
        "-q",
    )
    assert rc == 0, err
    assert "top5" in json.loads(out)["bm25+rerank"]


def test_train_errors_are_one_line(shared_root, questions_file, tmp_path, capsys):
    rc, _, err = _run(
        capsys,
        "train",
        str(shared_root),
        "--questions",
        str(questions_file),
        "--format",
        "nq-open",
        "--out",
        str(tmp_path / "m"),
        "--negatives",
        "in-batch,abstract",
    )
    assert rc == 2 and "unknown passage negative kind(s) abstract" in err and err.count("\n") == 1
    rc, _, err = _run(
        capsys,
        "train",
        str(tmp_path / "nowhere"),
        "--questions",
        str(questions_file),
        "--format",
        "nq-open",
        "--out",
        str(tmp_path / "m"),
    )
    assert rc == 2 and "hiera: error:" in err
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    rc, _, err = _run(
        capsys,
        "train-reranker",
        str(shared_root),
        "--questions",
        str(empty),
        "--format",
        "nq-open",
        "--out",
        str(tmp_path / "r"),
    )
    assert rc == 2 and "hiera: error:" in err
    assert not (tmp_path / "m").exists() and not (tmp_path / "r").exists()
