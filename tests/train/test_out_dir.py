"""``--out`` of every trainer: a finished training replaces the whole directory, so only a model of its own kind
(or nothing) may be there."""

from __future__ import annotations

import json
from pathlib import Path

import helpers
import pytest
from helpers import run_cli

from hiera.errors import BadInputError
from hiera.train.common import check_out


def test_check_out(tmp_path: Path) -> None:
    assert check_out(tmp_path / "new", "hiera-reader.json", "reader") == tmp_path / "new"
    (tmp_path / "empty").mkdir()
    assert check_out(tmp_path / "empty", "hiera-reader.json", "reader") == tmp_path / "empty"
    (tmp_path / "old").mkdir()
    (tmp_path / "old" / "hiera-reader.json").write_text("{}")
    assert check_out(tmp_path / "old", "hiera-reader.json", "reader") == tmp_path / "old"
    with pytest.raises(BadInputError, match="is not a reranker"):  # another kind of model
        check_out(tmp_path / "old", "hiera-reranker.json", "reranker")
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep me")
    with pytest.raises(BadInputError, match=r"--out .*mine already holds something that is not a reader"):
        check_out(tmp_path / "mine", "hiera-reader.json", "reader")
    (tmp_path / "file").write_text("x")
    with pytest.raises(BadInputError, match="is a file"):
        check_out(tmp_path / "file", "hiera-reader.json", "reader")


@pytest.mark.parametrize("command", ["train-reader", "train-reranker", "train"])
def test_a_trainer_pointed_at_a_collection_refuses_before_any_work(col_copy: Path, tmp_path: Path, capsys,
                                                                     command: str) -> None:
    qfile = tmp_path / "qs.jsonl"
    qfile.write_text("".join(json.dumps({"question": q.text, "answer": q.answers}) + "\n"
                             for q in helpers.tiny_questions()))
    before = sorted(p.name for p in col_copy.iterdir())
    rc, _, err = run_cli(capsys, command, str(col_copy), "--questions", str(qfile), "--format", "nq-open",
                         "--out", str(col_copy), "-q")
    assert rc == 2 and "already holds something that is not a" in err and err.count("\n") == 1
    assert sorted(p.name for p in col_copy.iterdir()) == before  # the collection is untouched


def test_check_out_tells_kinds_that_share_a_marker_and_guards_the_names_beside_out(tmp_path: Path) -> None:
    fetchhr = tmp_path / "fh"
    fetchhr.mkdir()
    (fetchhr / "hiera-train.json").write_text("{}")
    (fetchhr / "fetchhr.json").write_text("{}")
    assert check_out(fetchhr, "fetchhr.json", "FetchHR model") == fetchhr
    with pytest.raises(BadInputError, match="is not a model trained by hiera train"):
        check_out(fetchhr, "hiera-train.json", "model trained by hiera train", foreign=("fetchhr.json",))
    clf = tmp_path / "clf"
    clf.mkdir()
    (clf / "hiera-reranker.json").write_text(json.dumps({"kind": "set-classifier"}))
    assert check_out(clf, "hiera-reranker.json", "classifier", kind="set-classifier") == clf
    with pytest.raises(BadInputError, match="is not a reranker"):
        check_out(clf, "hiera-reranker.json", "reranker")
    mine = tmp_path / "rd.old"
    mine.mkdir()
    (mine / "notes.txt").write_text("precious")
    with pytest.raises(BadInputError, match=r"rd\.old is in the way"):
        check_out(tmp_path / "rd", "hiera-reader.json", "reader")
    (mine / "notes.txt").unlink()
    assert check_out(tmp_path / "rd", "hiera-reader.json", "reader") == tmp_path / "rd"  # empty: a leftover
