"""The cross-encoder model itself (hiera.crossencoder): loading, probabilities, the calibrated mix, its input text."""

from __future__ import annotations

import copy
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from hiera.crossencoder import META_FILE, Reranker, hit_input
from hiera.errors import HieraError
from hiera.results import Hit


@pytest.fixture(scope="module")
def reranker(reranker_dir: Path) -> Reranker:
    return Reranker(reranker_dir)


def test_a_trained_directory_loads_with_its_calibration(reranker: Reranker, reranker_dir: Path) -> None:
    meta = json.loads((reranker_dir / META_FILE).read_text())
    assert reranker.name == reranker_dir.name
    assert reranker.threshold == meta["threshold"] and reranker.weight == meta.get("weight", 1.0)


def test_scores_are_probabilities_in_input_order(reranker: Reranker) -> None:
    texts = ["The knight moves in an L shape.", "Jazz began in New Orleans.", "The knight moves in an L shape."]
    p = reranker.score("Which piece moves in an L shape?", texts)
    assert p.shape == (3,) and p.dtype == np.float32 and np.all((p >= 0) & (p <= 1))
    assert p[0] == pytest.approx(p[2], abs=1e-6)  # the same pair scores the same wherever it stands
    assert reranker.score("q", []).shape == (0,)


def test_combine_mixes_the_probability_with_the_min_max_base_score(reranker: Reranker) -> None:
    probs, base = np.array([0.2, 0.9, 0.5]), np.array([10.0, 0.0, 5.0])
    mixed = copy.copy(reranker)
    mixed.weight = 0.25
    np.testing.assert_allclose(mixed.combine(probs, base), 0.25 * probs + 0.75 * np.array([1.0, 0.0, 0.5]), atol=1e-6)
    # equal base scores carry no order: only the probabilities separate the hits
    flat = mixed.combine(probs, np.full(3, 7.0))
    assert np.argsort(-flat).tolist() == np.argsort(-probs).tolist()
    mixed.weight = 1.0  # the cross-encoder alone
    np.testing.assert_allclose(mixed.combine(probs, base), probs, atol=1e-7)


def test_the_input_is_the_titled_passage(reranker: Reranker) -> None:
    hit = Hit(rank=1, score=1.0, doc_id="chess", title="Chess", section_path=("Rules", "Checkmate"), text="The goal.")
    assert hit_input(hit) == "Chess, Rules, Checkmate\nThe goal."
    assert hit_input(hit, " > ") == "Chess > Rules > Checkmate\nThe goal."


def test_a_missing_or_broken_directory_is_one_error(reranker_dir: Path, tmp_path: Path) -> None:
    with pytest.raises(HieraError):
        Reranker(tmp_path / "missing")
    broken = shutil.copytree(reranker_dir, tmp_path / "broken")
    (broken / META_FILE).write_text("{", encoding="utf-8")
    with pytest.raises(HieraError, match="corrupt"):
        Reranker(broken)


@pytest.mark.parametrize("which", ["sentence encoder", "reader"])
def test_a_model_without_a_trained_scoring_head_is_refused(tiny_reader: Path, which: str) -> None:
    """Loaded as a cross-encoder, an encoder or a reader would get a random head: reranking at random, run to run."""
    from hiera.encode import resolve_model_path

    path = resolve_model_path("all-MiniLM-L6-v2") if which == "sentence encoder" else tiny_reader
    with pytest.raises(HieraError, match="is not a cross-encoder .* without a trained scoring head"):
        Reranker(path)
