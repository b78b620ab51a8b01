"""Dual-encoder training: a few real optimizer steps on the six-document collection."""

from __future__ import annotations

import json

import numpy as np
import pytest
from helpers import tiny_questions

from hiera.encode import Encoder
from hiera.errors import BadInputError
from hiera.train.args import TrainArgs
from hiera.train.biencoder import iteration2_questions, train_biencoder
from hiera.train.common import publish
from hiera.train.examples import load_examples

PROBE = ["Which piece moves in an L shape?", "Photosynthesis converts light energy."]


def _args(**kw) -> TrainArgs:
    base = dict(
        negatives=("in-batch", "bm25", "in-doc", "in-sec"),
        batch_size=4,
        max_steps=2,
        progress=False,
        learning_rate=1e-4,
        save_steps=1,
    )
    return TrainArgs(**(base | kw))


@pytest.fixture(scope="module")
def two_iterations(shared_root, tmp_path_factory):
    out = tmp_path_factory.mktemp("train") / "passage"
    report = train_biencoder(shared_root, tiny_questions(), out, _args(iterations=2), log=lambda m: None)
    return out, report


def test_training_changes_weights_and_round_trips(two_iterations):
    out, report = two_iterations
    base = Encoder("all-MiniLM-L6-v2", use_cache=False)
    trained = Encoder(out, use_cache=False)
    assert trained.fingerprint != base.fingerprint
    a, b = base.encode_document(PROBE), trained.encode_document(PROBE)
    assert a.shape == b.shape and not np.allclose(a, b, atol=1e-4)
    np.testing.assert_allclose(np.linalg.norm(b, axis=1), 1.0, rtol=1e-5)
    again = Encoder(out, use_cache=False).encode_document(PROBE)  # save/load round trip
    np.testing.assert_allclose(b, again, atol=1e-6)
    saved = json.loads((out / "hiera-train.json").read_text())
    assert [it["steps"] for it in saved["iterations"]] == [2, 2]
    assert saved["iterations"][0]["model"].endswith("passage-iter1") and saved["peak_rss_mb"] > 0
    assert all(it["device"] == "cpu" and it["steps_per_second"] > 0 for it in saved["iterations"])


def test_iteration_two_uses_negatives_mined_by_iteration_one(two_iterations, shared_root, col, pool):
    out, report = two_iterations
    work = out.with_name(out.name + ".work")
    first = out.with_name(out.name + "-iter1")
    fp = Encoder(first, use_cache=False).fingerprint
    lines = (work / "iter2-examples.jsonl").read_text().splitlines()
    meta = json.loads(lines[0])["meta"]
    assert meta["mined_with"] == fp
    examples = load_examples(work / "iter2-examples.jsonl", meta)
    # Recompute the mining by hand with the iteration-1 model.
    enc = Encoder(first, use_cache=False)
    corpus = enc.encode_document(pool.passage_input)
    for ex in examples:
        scores = corpus @ enc.encode_query(ex.query)
        expected = [
            int(i)
            for i in np.argsort(-scores, kind="stable")
            if int(i) != ex.positive_passage and not pool.passage_has(int(i), ex.answers)
        ][:4]
        assert ex.negatives["mined"] == expected
    assert report["iterations"][1]["negatives"][-1] == "mined"


def test_training_is_seeded(shared_root, tmp_path):
    qs = tiny_questions()
    a = train_biencoder(shared_root, qs, tmp_path / "a", _args(), log=lambda m: None)
    b = train_biencoder(shared_root, qs, tmp_path / "b", _args(), log=lambda m: None)
    assert a["iterations"][0]["train_loss"] == pytest.approx(b["iterations"][0]["train_loss"], rel=1e-5)
    ea = Encoder(tmp_path / "a", use_cache=False).encode_document(PROBE)
    eb = Encoder(tmp_path / "b", use_cache=False).encode_document(PROBE)
    np.testing.assert_allclose(ea, eb, atol=1e-5)


def test_interrupted_training_resumes_from_its_checkpoint(shared_root, tmp_path):
    out = tmp_path / "m"
    train_biencoder(shared_root, tiny_questions(), out, _args(max_steps=2), log=lambda m: None)
    assert (out.with_name("m.work") / "iter1" / "checkpoints" / "checkpoint-2").is_dir()
    report = train_biencoder(shared_root, tiny_questions(), out, _args(max_steps=3), log=lambda m: None)
    it = report["iterations"][0]
    assert it["resumed_from"].endswith("checkpoint-2") and it["steps"] == 3


def test_doc_level_training_runs(shared_root, tmp_path):
    report = train_biencoder(
        shared_root,
        tiny_questions(),
        tmp_path / "doc",
        _args(level="doc", negatives=("in-batch", "abstract", "all-text")),
        log=lambda m: None,
    )
    assert report["examples"]["kept"] == len(tiny_questions())
    assert set(report["examples"]["negatives_mean"]) == {"abstract", "all-text"}


def test_iteration_two_on_fresh_questions(shared_root, tmp_path):
    qs = tiny_questions()
    first = [q for i, q in enumerate(qs) if i % 2 == 0]
    fresh = iteration2_questions(qs, first, _args(iter2_questions="fresh", max_examples=3))
    assert len(fresh) == 3 and not {q.id for q in fresh} & {q.id for q in first}
    assert iteration2_questions(qs, first, _args()) is first  # the paper: the same questions
    assert iteration2_questions(first, first, _args(iter2_questions="fresh")) is first  # nothing else left

    out = tmp_path / "fresh"
    report = train_biencoder(shared_root, qs, out, _args(iterations=2, max_examples=4, iter2_questions="fresh"),
                             log=lambda m: None)
    work = out.with_name("fresh.work")
    ids1 = {json.loads(x)["qid"] for x in (work / "iter1-examples.jsonl").read_text().splitlines()[1:]}
    ids2 = {json.loads(x)["qid"] for x in (work / "iter2-examples.jsonl").read_text().splitlines()[1:]}
    assert len(ids1) == 4 and len(ids2) == 4 and not ids1 & ids2
    assert all("mined" in json.loads(x)["negatives"] for x in (work / "iter2-examples.jsonl").read_text().splitlines()[1:])
    assert report["examples_iter2"]["kept"] == 4 and [it["steps"] for it in report["iterations"]] == [2, 2]


def test_bad_arguments_are_refused(shared_root, tmp_path):
    with pytest.raises(BadInputError, match="valid: in-batch, bm25"):
        train_biencoder(shared_root, tiny_questions(), tmp_path / "x", _args(negatives=("abstract",)))
    with pytest.raises(BadInputError, match="iterations"):
        train_biencoder(shared_root, tiny_questions(), tmp_path / "x", _args(iterations=3))
    with pytest.raises(BadInputError, match="iter2-questions"):
        train_biencoder(shared_root, tiny_questions(), tmp_path / "x", _args(iter2_questions="new"))
    assert not (tmp_path / "x").exists()


def test_publish_keeps_the_old_model_until_the_new_one_is_complete(tmp_path):
    dest = tmp_path / "model"
    dest.mkdir()
    (dest / "weights").write_text("old")
    tmp = tmp_path / "model.partial"
    tmp.mkdir()
    (tmp / "weights").write_text("new")
    publish(tmp, dest)
    assert (dest / "weights").read_text() == "new" and not tmp.exists()
    assert not (tmp_path / "model.old").exists()


def test_publish_swaps_the_two_directories_in_one_step(tmp_path, monkeypatch):
    """On Linux the model directory is never missing: the new one takes its name in the same step the old one
    leaves it (renameat2's exchange), so no rename aside ever happens."""
    import sys
    from pathlib import Path

    import hiera.train.common as common

    if not sys.platform.startswith("linux"):
        pytest.skip("renameat2 is Linux's")
    dest, tmp = tmp_path / "model", tmp_path / "model.partial"
    dest.mkdir()
    (dest / "weights").write_text("old")
    tmp.mkdir()
    (tmp / "weights").write_text("new")
    new_inode = tmp.stat().st_ino
    renames: list[tuple] = []
    real_rename = Path.rename
    monkeypatch.setattr(Path, "rename", lambda self, target: renames.append((self, target)) or real_rename(self, target))
    common.publish(tmp, dest)
    assert renames == [] and dest.stat().st_ino == new_inode and (dest / "weights").read_text() == "new"
    assert not tmp.exists() and not (tmp_path / "model.old").exists()
