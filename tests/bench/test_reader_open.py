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
