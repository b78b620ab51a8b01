"""Cross-encoder training, its pairs and its threshold calibration."""

from __future__ import annotations

import json

import numpy as np
import pytest
from helpers import tiny_questions

from hiera.errors import HieraError
from hiera.eval.match import has_answer
from hiera.train.args import RerankerArgs
from hiera.train.reranker import calibrate_threshold, reranker_pairs, train_reranker


def test_pairs_have_bm25_and_random_negatives_in_equal_numbers(col, pool):
    qs = tiny_questions()
    pairs, labels = reranker_pairs(col, pool, qs, negatives_per_positive=2, seed=0)
    assert len(pairs) == 3 * len(qs) and labels.count(1.0) == len(qs)
    for i in range(0, len(pairs), 3):
        q = next(q for q in qs if q.text == pairs[i][0])
        assert labels[i : i + 3] == [1.0, 0.0, 0.0]
        pos_text = pairs[i][1].split("\n", 1)[1]
        assert has_answer(q.answers, pos_text)
        for _, text in pairs[i + 1 : i + 3]:
            assert not has_answer(q.answers, text.split("\n", 1)[1])
        bm25_top, _ = col.bm25_passages.search(q.text, 100)
        bm25_texts = [pool.passage_input[int(p)] for p in bm25_top]
        assert pairs[i + 1][1] in bm25_texts  # first negative comes from BM25's ranking


def test_hard_negatives_can_come_from_a_dense_retriever(col, pool):
    from hiera.retrieve import get_retriever

    qs = tiny_questions()
    pairs, labels = reranker_pairs(col, pool, qs, negatives_per_positive=2, seed=0, negatives_from="dense")
    assert labels.count(1.0) == len(qs)
    dense = get_retriever("dense", col)
    for i in range(0, len(pairs), 3):
        q = next(q for q in qs if q.text == pairs[i][0])
        ranked = [h.passage_id for h in dense.search(q.text, k=100, level="passage").hits]
        wrong = [pid for pid in ranked if not has_answer(q.answers, pool.passage_input[pool.passage_position[pid]])]
        # the hard negative is dense's best-ranked passage without the answer
        assert pairs[i + 1][1] == pool.passage_input[pool.passage_position[wrong[0]]]


def test_unknown_negative_source_is_a_one_line_error():
    with pytest.raises(HieraError, match="--negatives-from: unknown method 'nope'"):
        RerankerArgs(negatives_from="nope").check()


def test_calibration_finds_the_separating_threshold():
    probs = np.array([0.9, 0.8, 0.7, 0.4, 0.3, 0.2])
    labels = np.array([1, 1, 1, 0, 0, 0])
    c = calibrate_threshold(probs, labels)
    assert 0.4 < c["threshold"] < 0.7 and c["f1"] == 1.0 and c["auc"] == 1.0
    noisy = calibrate_threshold(np.array([0.9, 0.6, 0.5, 0.45, 0.1]), np.array([1, 0, 1, 0, 0]))
    assert noisy["f1"] == pytest.approx(0.8) and 0.45 < noisy["threshold"] < 0.5
    assert noisy["auc"] == pytest.approx(5 / 6)
    with pytest.raises(HieraError):
        calibrate_threshold(np.array([0.1, 0.2]), np.array([0, 0]))


def test_train_reranker_smoke(shared_root, tmp_path):
    out = tmp_path / "rr"
    args = RerankerArgs(max_steps=2, batch_size=4, progress=False, dev_fraction=0.25, learning_rate=1e-4)
    report = train_reranker(shared_root, tiny_questions(), out, args, log=lambda m: None)
    meta = json.loads((out / "hiera-reranker.json").read_text())
    assert meta["threshold"] == report["threshold"] and 0.0 <= meta["threshold"] <= 1.0
    assert meta["train"]["steps"] == 2 and meta["dev_questions"] == 2
    assert meta["train"]["device"] == "cpu" and meta["train"]["steps_per_second"] > 0
    assert meta["train"]["questions"] == len(tiny_questions()) - 2
    assert meta["dev"]["pairs"] == 6
    # the cross-encoder's weight, fitted on the same held-out questions against the negatives' retriever
    fit = meta["weight_fit"]
    assert meta["weight"] in [float(w) for w in fit["top1"]] and fit["method"] == "bm25" and fit["questions"] == 2
    assert fit["top1"][f"{meta['weight']:.1f}"] == max(fit["top1"].values())
    # --calibrate-only refits it on the same split, without training: the same weight, the model untouched
    weights = (out / "model.safetensors").read_bytes()
    from hiera.train.reranker import recalibrate_reranker

    again = recalibrate_reranker(shared_root, tiny_questions(), out, args, log=lambda m: None)
    assert again["weight"] == meta["weight"] and again["weight_fit"] == fit
    assert (out / "model.safetensors").read_bytes() == weights
    assert json.loads((out / "hiera-reranker.json").read_text())["train"] == meta["train"]
