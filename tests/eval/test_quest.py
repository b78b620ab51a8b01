"""QUEST's official metrics on a hand-made gold file and prediction file, values computed by hand."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hiera.errors import BadInputError, BadRecordError
from hiera.eval.quest import quest_scores, score_files
from hiera.sets.queries import Prediction, load_set_queries, write_predictions

GOLD = [
    {"query": "q1", "docs": ["a", "b"], "metadata": {"template": "_"}},
    {"query": "q2", "docs": ["c", "d", "e", "f"], "metadata": {"template": "_ or _"}},
    {"query": "q3", "docs": ["g"], "metadata": {"template": "_ or _"}},
    {"query": "q4", "docs": ["h"], "metadata": {"template": "_"}},  # never predicted
]
PRED = [
    Prediction("q1", ["a", "x", "b"], [0.9, 0.8, 0.7]),  # P 2/3, R 1,   F1 0.8
    Prediction("q2", ["c", "y"], [0.9, 0.1]),  # P 1/2, R 1/4, F1 1/3
    Prediction("q3", ["z"], [0.5]),  # no correct document: P = R = F1 = 0
    Prediction("not in gold", ["a"], [1.0]),  # ignored
]


@pytest.fixture
def files(tmp_path: Path) -> tuple[Path, Path]:
    gold = tmp_path / "gold.jsonl"
    gold.write_text("\n".join(json.dumps(r) for r in GOLD) + "\n", encoding="utf-8")
    pred = tmp_path / "pred.jsonl"
    write_predictions(pred, PRED)
    return gold, pred


def test_hand_computed_values(files):
    got = score_files(*files, ks=(1, 2, 3))
    approx = pytest.approx
    assert got["count"] == 4 and got["missing"] == 1
    assert got["set_precision"] == approx((2 / 3 + 1 / 2) / 4)  # 7/24
    assert got["set_recall"] == approx((1 + 1 / 4) / 4)  # 0.3125
    assert got["set_f1"] == approx((0.8 + 1 / 3) / 4)  # 17/60
    # recall@k: q1 1/2, 1/2, 1; q2 1/4 at every k; q3, q4 0
    assert got["recall@1"] == approx(0.75 / 4)
    assert got["recall@2"] == approx(0.75 / 4)
    assert got["recall@3"] == approx(1.25 / 4)
    # mrecall@k: only q1 has its whole gold set within its top 3
    assert (got["mrecall@1"], got["mrecall@2"], got["mrecall@3"]) == (0.0, 0.0, 0.25)

    single, union = got["by_template"]["_"], got["by_template"]["_ or _"]
    assert set(got["by_template"]) == {"_", "_ or _"}
    assert single["count"] == union["count"] == 2
    assert single["set_precision"] == approx(1 / 3) and single["set_recall"] == approx(0.5)
    assert single["set_f1"] == approx(0.4) and single["recall@3"] == approx(0.5) and single["mrecall@3"] == 0.5
    assert union["set_precision"] == approx(0.25) and union["set_recall"] == approx(0.125)
    assert union["set_f1"] == approx(1 / 6) and union["recall@1"] == approx(0.125) and union["mrecall@3"] == 0.0


def test_default_cutoffs_are_quests(files):
    got = score_files(*files)
    for k in (20, 50, 100, 1000):
        assert f"recall@{k}" in got and f"mrecall@{k}" in got
    assert got["recall@20"] == pytest.approx(1.25 / 4)


def test_in_memory_and_errors(files):
    gold = load_set_queries(files[0])
    assert quest_scores(gold, {"q1": ["a", "b"]}, ks=(2,))["by_template"]["_"]["set_f1"] == pytest.approx(0.5)
    with pytest.raises(BadInputError, match="no gold queries"):
        quest_scores([], {})
    empty = files[0].parent / "empty-gold.jsonl"
    empty.write_text(json.dumps({"query": "q", "docs": [], "metadata": {"template": "_"}}) + "\n", encoding="utf-8")
    with pytest.raises(BadRecordError, match="gold set"):
        score_files(empty, files[1])
