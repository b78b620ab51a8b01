"""The one fusion module: RRF, interpolation and the missing-candidate policy, checked by hand."""

from __future__ import annotations

import numpy as np
import pytest

from hiera.fusion import RRF_K, Ranked, align, by_max, dhr_score, interpolate, minmax, mix, rrf


def _r(ids: list[int], scores: list[float]) -> Ranked:
    return Ranked(np.array(ids, dtype=np.int64), np.array(scores, dtype=np.float32))


def test_align_unions_ids_and_fills_the_lowest_score_where_absent() -> None:
    a = align([_r([7, 3], [0.9, 0.5]), _r([3, 1], [4.0, 2.0])])
    assert a.ids.tolist() == [1, 3, 7]
    assert a.scores.tolist() == [[0.5, 0.5, pytest.approx(0.9)], [2.0, 4.0, 2.0]]
    assert a.ranks.tolist() == [[0, 2, 1], [2, 1, 0]]


def test_a_complete_list_gives_its_absent_candidates_zero() -> None:
    a = align([Ranked(np.array([7, 3]), np.array([0.9, 0.5]), complete=True), _r([3, 1], [4.0, 2.0])])
    assert a.scores.tolist() == [[0.0, 0.5, pytest.approx(0.9)], [2.0, 4.0, 2.0]]
    assert a.ranks.tolist() == [[0, 2, 1], [2, 1, 0]]


def test_rrf_adds_nothing_for_a_missing_candidate() -> None:
    a, fused = rrf([_r([7, 3], [0.9, 0.5]), _r([3, 1], [4.0, 2.0])])
    expect = {1: 1 / (RRF_K + 2), 3: 1 / (RRF_K + 2) + 1 / (RRF_K + 1), 7: 1 / (RRF_K + 1)}
    assert dict(zip(a.ids.tolist(), fused.tolist(), strict=True)) == pytest.approx(expect)
    assert fused.dtype == np.float32


def test_interpolation_with_minmax_gives_absent_candidates_zero() -> None:
    bm25, dense = _r([1, 2], [10.0, 5.0]), _r([2, 3], [0.8, 0.4])
    a, fused = interpolate([Ranked(bm25.ids, minmax(bm25.scores)), Ranked(dense.ids, minmax(dense.scores))], [0.25, 0.75])
    got = dict(zip(a.ids.tolist(), fused.tolist(), strict=True))
    assert got == pytest.approx({1: 0.25 * 1.0 + 0.75 * 0.0, 2: 0.25 * 0.0 + 0.75 * 1.0, 3: 0.0})


def test_empty_lists() -> None:
    a, fused = rrf([_r([], []), _r([], [])])
    assert len(a.ids) == 0 and len(fused) == 0
    a, fused = interpolate([_r([], []), _r([4], [0.3])], [0.5, 0.5])
    assert a.ids.tolist() == [4] and fused.tolist() == pytest.approx([0.15])


def test_normalizers_and_scores() -> None:
    assert by_max(np.array([2.0, 4.0, 1.0])).tolist() == [0.5, 1.0, 0.25]
    assert by_max(np.array([0.0, -1.0])).tolist() == [0.0, -1.0]
    assert minmax(np.array([3.0, 3.0])).tolist() == [1.0, 1.0]
    assert mix(np.array([1.0]), np.array([0.0]), 0.3).tolist() == pytest.approx([0.3])
    assert dhr_score(np.array([0.5, 0.2]), np.array([1.0, 0.5]), 2.0).tolist() == pytest.approx([2.5, 1.2])
