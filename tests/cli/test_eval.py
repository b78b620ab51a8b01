"""``hiera eval`` with a reader and on QUEST set queries (``--format quest``), and ``hiera tune``'s report."""

from __future__ import annotations

import json
from pathlib import Path

import helpers
import pytest
from helpers import run_cli

from hiera.cli import main
from hiera.collection import Collection
from hiera.eval.match import has_answer
from hiera.retrieve import get_retriever
from hiera.sets.queries import load_set_queries, read_predictions


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


def test_tune_target_k(shared_root: Path, col: Collection, tmp_path: Path, capsys) -> None:
    qfile = tmp_path / "qs.jsonl"
    qfile.write_text("".join(json.dumps({"question": q.text, "answer": q.answers}) + "\n" for q in helpers.tiny_questions()))
    base = ["tune", str(shared_root), "--questions", str(qfile), "--format", "nq-open", "--grid", "top_docs=1,3", "--dry-run", "--quiet"]
    rc, out, err = run_cli(capsys, *base, "--target-k", "1")
    assert rc == 0, err
    data = json.loads(out)
    # the reported top-1 is what searching with the chosen parameters gets, question by question
    qs = helpers.tiny_questions()
    runs = get_retriever("dhr", col).batch_search([q.text for q in qs], k=1, **data["params"])
    found = [has_answer(q.answers, r.hits[0].text, q.answer_mode) for q, r in zip(qs, runs, strict=True)]
    assert data["top1"] == pytest.approx(sum(found) / len(qs))
    assert "top20" not in data and data["params"]["top_docs"] in (1, 3) and data["saved"] is None
    rc, out, err = run_cli(capsys, *base, "--target-k", "0")
    assert rc == 2 and "--target-k" in err


def test_eval_format_quest_json_and_predictions(quest: dict, tmp_path: Path, capsys) -> None:
    out = tmp_path / "out"
    rc = main(["eval", str(quest["root"]), "--questions", str(quest["queries"]), "--format", "quest",
               "--retrievers", "bm25-doc,sets", "--set-k", "5", "--set", "sets.candidates=20", "--json",
               "--out", str(out), "--quiet"])
    data = json.loads(capsys.readouterr().out)
    assert rc == 0 and set(data) == {"bm25-doc", "sets"}
    keys = {"set_precision", "set_recall", "set_f1", *(f"recall@{k}" for k in (20, 50, 100, 1000)),
            *(f"mrecall@{k}" for k in (20, 50, 100, 1000))}
    for m in data.values():
        assert keys <= set(m) and m["count"] == 5 and m["gold_titles_missing"] == 0
        assert set(m["by_template"]) == {q.template for q in load_set_queries(quest["queries"])}
        for block in m["by_template"].values():
            assert keys <= set(block)
        assert all(0 <= m[k] <= 1 for k in keys)
    assert data["bm25-doc"]["predicted_set"] == "top-5" and data["bm25-doc"]["avg_set_size"] == 5
    assert data["sets"]["predicted_set"] == "answer_set"
    preds = read_predictions(out / "sets.sets.jsonl")
    assert len(preds) == 5 and all(p.template for p in preds.values())
    ranking = read_predictions(out / "bm25-doc.ranking.jsonl")
    assert all(len(p.docs) >= 5 for p in ranking.values())
    assert "| sets | all |" in (out / "results.md").read_text()


def test_questions_whose_gold_the_collection_lacks_are_noted_and_recorded(squad_tiny, tmp_path: Path, capsys) -> None:
    root, qfile = squad_tiny
    data = json.loads(qfile.read_text())
    stray = {"title": "An_article_not_ingested", "paragraphs": [{"context": "Nothing here is indexed.", "qas": [
        {"id": "stray", "question": "What is not indexed?", "answers": [{"text": "Nothing", "answer_start": 0}]}]}]}
    data["data"].append(stray)
    # a SQuAD 2.0 question with no answer is left out, and the note says how many were
    data["data"][0]["paragraphs"][0]["qas"].append({"id": "none", "question": "What is unanswerable?",
                                                    "answers": [], "is_impossible": True})
    mixed = tmp_path / "mixed.json"
    mixed.write_text(json.dumps(data))
    n = sum(len(p["qas"]) for a in data["data"] for p in a["paragraphs"]) - 1
    out = tmp_path / "out"
    rc = main(["eval", str(root), "--questions", str(mixed), "--format", "squad", "--retrievers", "bm25",
               "--ks", "1", "--latency-sample", "0", "--out", str(out), "--quiet"])
    err = capsys.readouterr().err
    assert rc == 0 and f"note: 1 of {n} questions name gold documents {root} does not hold" in err
    assert f"note: 1 SQuAD 2.0 questions of {mixed} are unanswerable (is_impossible) and are left out; the " \
           f"figures cover the {n} answerable questions evaluated" in err
    record = json.loads((out / "run.json").read_text())
    assert record["questions_without_gold"] == 1 and record["questions_unanswerable_left_out"] == 1


def test_out_keeps_only_this_runs_files(squad_tiny, tmp_path: Path, capsys) -> None:
    """A second run into the same --out removes the run files the first listed and it did not write; a file
    hiera did not write stays."""
    root, qfile = squad_tiny
    out = tmp_path / "out"
    common = ["--questions", str(qfile), "--format", "squad", "--ks", "1", "--latency-sample", "0",
              "--out", str(out), "--quiet"]
    assert main(["eval", str(root), "--retrievers", "bm25,bm25-dhr", *common]) == 0
    assert (out / "bm25-dhr.trec").exists() and (out / "bm25.trec").exists()
    (out / "notes.txt").write_text("mine")
    capsys.readouterr()
    assert main(["eval", str(root), "--retrievers", "bm25", *common]) == 0
    assert "removed the earlier run's bm25-dhr.trec" in capsys.readouterr().err
    assert not (out / "bm25-dhr.trec").exists() and (out / "bm25.trec").exists()
    assert (out / "notes.txt").read_text() == "mine"
    assert "bm25.trec" in json.loads((out / "run.json").read_text())["files"]


def test_a_failed_write_leaves_the_earlier_runs_files(squad_tiny, tmp_path: Path, capsys,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """Files are written aside and moved in whole: a full disk halfway leaves the earlier run, not a mix."""
    import hiera.eval.run as run_mod

    root, qfile = squad_tiny
    out = tmp_path / "out"
    common = ["--questions", str(qfile), "--format", "squad", "--ks", "1", "--latency-sample", "0",
              "--out", str(out), "--quiet"]
    assert main(["eval", str(root), "--retrievers", "bm25,bm25-dhr", *common]) == 0
    before = {p.name: p.read_bytes() for p in out.iterdir()}

    def full_disk(runs, questions, where):
        (where / "bm25.trec").write_text("q1 Q0 half")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(run_mod, "write_trec", full_disk)
    capsys.readouterr()
    assert main(["eval", str(root), "--retrievers", "bm25", "--ks", "1,5", *common[4:], *common[:4]]) != 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "No space left on device" in err[0] and "the earlier run's" in err[0]
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before


def test_a_method_a_sharded_build_cannot_serve_is_refused_before_any_runs(squad_tiny, tmp_path: Path, capsys) -> None:
    import shutil

    root, qfile = squad_tiny
    sharded = tmp_path / "sharded"
    shutil.copytree(root, sharded, symlinks=True)
    assert main(["build", str(sharded), "--shards", "2", "--no-dense", "--quiet"]) == 0
    capsys.readouterr()
    rc = main(["eval", str(sharded), "--questions", str(qfile), "--format", "squad", "--retrievers", "bm25,linking",
               "--ks", "1", "--latency-sample", "0", "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert rc == 2 and "'linking' is not served on a sharded build" in err
    assert "bm25:" not in err and not (tmp_path / "out" / "results.json").exists()  # bm25 never ran


def test_a_staging_folder_is_cleared_only_when_its_run_is_gone(squad_tiny, tmp_path: Path, capsys) -> None:
    """A run killed while writing leaves a hidden folder the next run clears; one of a run still writing stays."""
    import os

    root, qfile = squad_tiny
    out = tmp_path / "out"
    (out / f".hiera-eval-{os.getpid()}-alive").mkdir(parents=True)
    (out / ".hiera-eval-999999999-dead").mkdir()
    assert main(["eval", str(root), "--questions", str(qfile), "--format", "squad", "--retrievers", "bm25",
                 "--ks", "1", "--latency-sample", "0", "--out", str(out), "--quiet"]) == 0
    assert sorted(p.name for p in out.glob(".hiera-eval-*")) == [f".hiera-eval-{os.getpid()}-alive"]


def test_an_evaluation_stopped_by_another_writer_says_why(squad_tiny, tmp_path: Path, capsys,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """A removal committed while it runs would mix two collections in one comparison: refused, saying so."""
    import shutil

    import hiera.builds as builds
    from hiera.builds import remove_documents
    from hiera.corpus.store import CorpusStore

    root, qfile = squad_tiny
    copy = tmp_path / "col"
    shutil.copytree(root, copy, symlinks=True)
    victim = next(iter(CorpusStore(copy).iter_docs())).id
    real_open = builds.open_collection

    def open_then_another_writer_removes(*a, **k):
        col = real_open(*a, **k)
        remove_documents(copy, [victim], log=helpers.QUIET, compact_at=1.0, progress=False)
        return col

    monkeypatch.setattr(builds, "open_collection", open_then_another_writer_removes)
    rc = main(["eval", str(copy), "--questions", str(qfile), "--format", "squad", "--retrievers", "bm25",
               "--ks", "1,5", "--latency-sample", "0"])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc != 0 and "the evaluation stopped at bm25: another process removed documents" in err[-1]
