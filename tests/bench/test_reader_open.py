"""bench.reader_open: distant-supervision training never sees an evaluated question, and the summary counts right."""

from __future__ import annotations

import numpy as np
import pytest

from bench import reader_open


def test_training_questions_are_disjoint_from_every_evaluated_one(data_dir):
    if not (data_dir / "odqa-questions" / "NQ-open.dev.jsonl").exists():
        pytest.skip("odqa-questions not in the shared data")
    sp = reader_open.splits(trivia_eval=500)
    evaluated = {reader_open._norm(q.text) for qs in sp["eval"].values() for q in qs}
    trained = [reader_open._norm(q.text) for q in sp["train"]]
    assert len(sp["eval"]["nq-open"]) == 3610 and len(sp["eval"]["trivia"]) == 500
    assert trained and not evaluated & set(trained)
    # the held-back TriviaQA half is out of training whether or not the sample evaluates it
    whole = reader_open.splits()
    assert not {reader_open._norm(q.text) for q in whole["eval"]["trivia"]} & set(trained)
    assert len(whole["eval"]["trivia"]) + whole["train_sources"]["trivia-train-half"] == 11313
    assert all(q.answers for q in sp["train"])


def test_summary_separates_the_answerable_and_the_deeply_read_questions():
    rows = [{"1": ["a", 1.0], "5": ["a", 1.0], "20": ["b", 0.0]},
            {"1": ["x", 0.0], "5": ["y", 0.0], "20": ["z", 1.0]},
            {"1": ["", 0.0]},
            {"1": ["c", 1.0], "5": ["c", 1.0], "20": ["c", 1.0]},
            {"1": ["d", 1.0]}]
    s = reader_open.summarize("r", rows, np.array([True, True, False, True, True]))
    assert s["answerable"] == 4 and s["em@1"] == 0.6 and s["em@1_answerable"] == 0.75
    assert s["deep_questions"] == 3 and s["deep_answerable"] == 3
    assert s["deep_em@1"] == pytest.approx(2 / 3) and s["deep_em@20"] == pytest.approx(2 / 3)
    assert s["deep_lost@20"] == pytest.approx(1 / 3) and s["deep_gained@20"] == pytest.approx(1 / 3)


def test_a_reranked_reading_reads_dhrs_passages_in_the_cross_encoders_order(col, reranker_dir):
    import helpers

    qs = helpers.tiny_questions()[:4]
    plain = reader_open.retrieve(col, qs, 5)
    reranked = reader_open.retrieve(col, qs, 5, rerank=reranker_dir)
    for a, b in zip(plain, reranked, strict=True):
        # the same passages (so the answerable subset is DHR's), each with its DHR rank and the reranker's score
        assert sorted(h.passage_id for h in a) == sorted(h.passage_id for h in b) and len(a) == 5
        assert [h.rank for h in b] == [1, 2, 3, 4, 5]
        assert [h.stages["retrieve"].rank for h in b] == [
            next(x.rank for x in a if x.passage_id == h.passage_id) for h in b]
        assert all("rerank" in h.stages for h in b)
        assert [h.score for h in b] == sorted((h.score for h in b), reverse=True)
    # a reranked reading is cached apart from the plain one, under a name that follows the model's weights
    assert reader_open.rerank_key(None) == "" and reader_open.rerank_key(reranker_dir).startswith("-rr")
    assert reader_open.rerank_key(reranker_dir) == reader_open.rerank_key(reranker_dir)
