"""The training commands: ``hiera train`` → ``build --passage-encoder`` → ``search/eval --rerank`` end to end,
``train-reranker``, ``train-classifier`` (then ``sets tune``), ``train-fetchhr`` and ``train-reader``."""

from __future__ import annotations

import json
from pathlib import Path

import helpers
import numpy as np
import pytest
from helpers import run_cli

from hiera.cli import main
from hiera.collection import Collection
from hiera.fetchhr.model import FetchHRModel
from hiera.retrieve.sets import SetsRetriever
from hiera.sets.classifier import THRESHOLDS_FILE, SetClassifier


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
    rc, out, err = run_cli(
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
    rc, out, err = run_cli(
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

    rc, _, err = run_cli(capsys, "build", str(root), "--passage-encoder", str(model), "-q")
    assert rc == 0, err
    manifest = json.loads((root / "index" / "manifest.json").read_text())
    assert manifest["models"]["passage"]["path"] == str(model)
    assert manifest["models"]["doc"]["path"] != str(model)

    rc, out, err = run_cli(
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

    rc, out, err = run_cli(
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
    rc, _, err = run_cli(
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
    rc, _, err = run_cli(
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
    rc, _, err = run_cli(
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


def test_calibrate_only_needs_a_trained_reranker(shared_root, tmp_path, capsys):
    qfile = tmp_path / "q.jsonl"
    qfile.write_text('{"question": "Which piece moves in an L shape?", "answers": ["knight"]}\n')
    rc = main(["train-reranker", str(shared_root), "--questions", str(qfile), "--format", "dpr-jsonl",
               "--out", str(tmp_path / "none"), "--calibrate-only"])
    assert rc == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("hiera: error: --calibrate-only:") and "has no hiera-reranker.json" in err and "\n" not in err


def test_train_classifier_cli_then_tune_then_search(quest: dict, quest_col: Collection, tmp_path: Path, capsys) -> None:
    out = tmp_path / "clf"
    rc = main(["train-classifier", str(quest["root"]), "--questions", str(quest["queries"]), "--format", "quest",
               "--out", str(out), "--max-steps", "2", "--batch-size", "4", "--negatives", "4", "--max-length", "48",
               "--quiet"])
    report = json.loads(capsys.readouterr().out)
    assert rc == 0 and report["train"]["steps"] == 2 and report["peak_rss_mb"] > 0 and report["seconds_total"] > 0
    meta = json.loads((out / "hiera-reranker.json").read_text())
    assert meta["kind"] == "set-classifier" and 0 <= meta["threshold"] <= 1
    assert not (tmp_path / "clf.partial").exists()
    clf = SetClassifier(out)
    assert clf.thresholds.source == "calibrated"
    p = clf.score("German architects", ["a", "b"], ["Walter Gropius\nGerman architect.", "Chess\nA board game."])
    assert p.shape == (2,) and np.all((p >= 0) & (p <= 1))
    assert clf.score("German architects", ["a"], ["(cached: not read)"])[0] == pytest.approx(p[0])

    # the same --out with another recipe: the finished run's checkpoint is not resumed (it would end the run at once)
    assert (tmp_path / "clf.work" / "checkpoints" / "checkpoint-2").is_dir()
    rc = main(["train-classifier", str(quest["root"]), "--questions", str(quest["queries"]), "--format", "quest",
               "--out", str(out), "--max-steps", "2", "--batch-size", "4", "--negatives", "4", "--max-length", "48",
               "--lr", "1e-4", "--quiet"])
    again = json.loads(capsys.readouterr().out)
    assert rc == 0 and again["train"]["resumed_from"] is None and again["train"]["steps"] == 2

    rc = main(["sets", "tune", str(quest["root"]), "--questions", str(quest["queries"]), "--format", "quest",
               "--classifier", str(out), "--set", "candidates=5", "--quiet"])
    tuned = json.loads(capsys.readouterr().out)
    assert rc == 0 and tuned["saved"] and (out / THRESHOLDS_FILE).exists() and 0 <= tuned["f1"] <= 1
    assert SetClassifier(out).thresholds.source == "tuned"

    res = SetsRetriever(quest_col, classifier=str(out), candidates=5).search("German architects", k=5)
    cl = next(s for s in res.trace if s.name == "classify").detail
    assert cl["classifier"] == "clf" and cl["thresholds_from"] == "tuned" and res.answer_set is not None
    assert main(["train-classifier", str(quest["root"]), "--questions", str(quest["queries"]), "--format", "squad",
                 "--out", str(tmp_path / "x")]) == 2


def test_cli_trains_a_subset_of_layers(squad_article, tmp_path, capsys) -> None:
    out = tmp_path / "cli-heads"
    rc = main(["train-fetchhr", str(squad_article["root"]), "--questions", str(squad_article["file"]), "--format", "squad",
               "--out", str(out), "--layers", "3,6", "--max-steps", "1", "--batch-size", "4", "--limit", "8", "-q"])
    printed = json.loads(capsys.readouterr().out)
    assert rc == 0 and printed["layers"] == [3, 6] and printed["steps"] == 1
    assert FetchHRModel.load(out).layers == [3, 6]


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
    heads = (out / "reader-heads.safetensors").read_bytes()
    assert main([*base, "--max-steps", "4"]) == 0  # finished: the rerun takes no step past the last
    third = json.loads(capsys.readouterr().out)
    assert third["train"]["steps"] == 4 and third["train"]["resumed_from"].endswith("checkpoint-4")
    assert (out / "reader-heads.safetensors").read_bytes() == heads
    assert main([*base, "--max-steps", "2", "--stride", "60"]) == 2  # stride must stay below half a window
    assert "--stride" in capsys.readouterr().err


def test_train_reader_continues_a_trained_reader_on_answer_strings(squad_tiny, tiny_reader, tmp_path: Path, capsys):
    """--init starts from the reader's encoder and heads (a learning rate of ~0 leaves them as they were; fresh heads
    differ), and answer-string questions (no gold passage) train on the passages that contain their answers."""
    from readdata import RULES
    from safetensors.numpy import load_file

    from hiera.eval.questions import load_squad
    from hiera.read.model import HEADS_FILE

    root, qfile = squad_tiny
    qs = load_squad(qfile, rules=RULES)
    strings = tmp_path / "strings.jsonl"
    strings.write_text("".join(json.dumps({"question": q.text, "answer": list(q.answers)}) + "\n" for q in qs))
    run = ["train-reader", str(root), "--questions", str(strings), "--format", "dpr-jsonl", "--batch-size", "2",
           "--max-length", "96", "--stride", "24", "--max-steps", "1", "--lr", "1e-12", "-q"]
    assert main([*run, "--out", str(tmp_path / "cont"), "--init", str(tiny_reader)]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["examples"]["groups"] >= 2 and report["examples"]["positives_gold"] == 0  # positives found by BM25
    assert main([*run, "--out", str(tmp_path / "fresh")]) == 0
    capsys.readouterr()
    before, cont, fresh = (load_file(str(d / HEADS_FILE)) for d in (tiny_reader, tmp_path / "cont", tmp_path / "fresh"))
    assert all(np.allclose(before[k], cont[k], atol=1e-5) for k in before)
    assert not all(np.allclose(before[k], fresh[k], atol=1e-2) for k in before)
    meta = json.loads((tmp_path / "cont" / "hiera-reader.json").read_text())
    assert meta["init"]["reader"] == str(tiny_reader)
    assert meta.get("decoding") == json.loads((tiny_reader / "hiera-reader.json").read_text()).get("decoding")
    assert main([*run, "--out", str(tmp_path / "bad"), "--init", str(tmp_path)]) == 2  # not a reader: one line
    assert "hiera-reader.json" in capsys.readouterr().err and not (tmp_path / "bad").exists()


def test_train_reader_interpolates_toward_its_init_without_training_again(squad_tiny, tiny_reader, tmp_path: Path,
                                                                          capsys):
    """--interpolate W saves init + W·(trained − init), tensor by tensor; rerun with it after the plain run, the
    run resumes from its last checkpoint (no new steps) and only the saved weights change."""
    from safetensors.numpy import load_file

    from hiera.read.model import HEADS_FILE

    root, qfile = squad_tiny
    out = tmp_path / "rd"
    run = ["train-reader", str(root), "--questions", str(qfile), "--format", "squad", "--out", str(out),
           "--init", str(tiny_reader), "--batch-size", "4", "--max-length", "96", "--stride", "24", "--epochs", "1",
           "--lr", "1e-3", "-q"]
    assert main(run) == 0
    steps = json.loads(capsys.readouterr().out)["train"]["steps"]
    files = ("model.safetensors", HEADS_FILE)
    start, trained = ({f: load_file(str(d / f)) for f in files} for d in (tiny_reader, out))
    moved = [k for k in trained[HEADS_FILE] if not np.allclose(trained[HEADS_FILE][k], start[HEADS_FILE][k], atol=1e-4)]
    assert moved, "the training steps must move the heads for the interpolation to be seen"
    assert main([*run, "--interpolate", "0.25"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["train"]["resumed_from"].endswith(f"checkpoint-{steps}") and report["train"]["steps"] == steps
    # the record describes the model, not this call's zero new steps
    assert report["train"]["steps_this_call"] == 0 and report["train"]["steps_per_second"] == 0
    assert report["train"]["train_loss"] is None or report["train"]["train_loss"] > 0
    mixed = {f: load_file(str(out / f)) for f in files}
    for f in files:
        assert mixed[f].keys() == trained[f].keys()
        for k, v in mixed[f].items():
            if np.issubdtype(v.dtype, np.floating):
                assert np.allclose(v, start[f][k] + 0.25 * (trained[f][k] - start[f][k]), atol=1e-6), (f, k)
    assert json.loads((out / "hiera-reader.json").read_text())["init"]["interpolate"] == 0.25
    plain = [a for a in run if a != "--init" and a != str(tiny_reader)]
    onto_init = [*[str(tiny_reader) if a == str(out) else a for a in run], "--interpolate", "0.5"]
    for bad, says in (([*plain, "--interpolate", "0.5"], "--init"), ([*run, "--interpolate", "1.5"], "(0, 1]"),
                      (onto_init, "--interpolate needs an --out other than --init"),
                      ([*run, "--max-length", "1024"], "--max-length 1024 is longer than the 512 positions")):
        assert main(bad) == 2
        err = capsys.readouterr().err
        assert says in err and len(err.strip().splitlines()) == 1


def test_train_reader_replays_questions_of_another_collection(squad_tiny, tiny_reader, tmp_path: Path):
    """``replay`` adds the groups of (collection, questions) sources to the run's own: both counted, both trained."""
    from readdata import RULES

    from hiera.eval.questions import load_squad
    from hiera.train.args import ReaderArgs
    from hiera.train.reader import train_reader

    root, qfile = squad_tiny
    qs = load_squad(qfile, rules=RULES)
    args = ReaderArgs(max_steps=1, batch_size=2, max_length=96, stride=24, progress=False, init=str(tiny_reader))
    meta = train_reader(root, qs[:4], tmp_path / "r", args, log=helpers.QUIET, replay=[(root, qs[4:])])
    (replayed,) = meta["replay"]
    assert meta["examples"]["groups"] == 4 and replayed["examples"]["questions"] == len(qs) - 4
    assert replayed["examples"]["groups"] >= len(qs) - 6 and replayed["collection"] == str(root)


@pytest.mark.parametrize("command", ["train", "train-reranker", "train-classifier", "train-fetchhr", "train-reader"])
@pytest.mark.parametrize(("option", "value"), [("--epochs", "0"), ("--max-steps", "0"), ("--save-steps", "0"),
                                               ("--batch-size", "-2"), ("--max-examples", "0"), ("--lr", "nan")])
def test_a_training_budget_below_one_is_refused(tmp_path: Path, capsys, command: str, option: str, value: str) -> None:
    """A zero or negative budget is refused in one line before any work (``--max-steps 0`` once meant no limit)."""
    with pytest.raises(SystemExit) as e:  # argparse's own refusal: usage, then one line
        main([command, str(tmp_path), "--questions", "q.json", "--format", "squad", "--out", str(tmp_path / "m"),
              option, value])
    err = capsys.readouterr().err
    assert e.value.code == 2 and f"argument {option}: " in err.strip().splitlines()[-1]
    assert not (tmp_path / "m").exists()

