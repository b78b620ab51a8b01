"""Paired bootstrap intervals and lost/gained fractions on known score lists."""

from __future__ import annotations

import numpy as np
import pytest

from hiera.eval.paired import lost_and_gained, paired_ci


def test_paired_intervals_bracket_the_mean_difference():
    assert paired_ci([1, 0, 1], [1, 0, 1]) == (0.0, 0.0, 0.0)
    assert paired_ci([1.0] * 50, [0.0] * 50) == (100.0, 100.0, 100.0)
    rng = np.random.default_rng(3)
    a, b = rng.integers(0, 2, 400), rng.integers(0, 2, 400)
    mean, lo, hi = paired_ci(a, b)
    assert mean == pytest.approx(100 * (a.mean() - b.mean()))
    assert lo < mean < hi and hi - lo < 20
    # pairing matters: the same +1-point shift on every question is certain, whatever the spread
    x = rng.normal(0.5, 0.3, 300)
    assert paired_ci(x + 0.01, x)[1] == pytest.approx(1.0)
    with pytest.raises(ValueError):
        paired_ci([], [])


def test_lost_and_gained_count_questions_that_changed_sides():
    assert lost_and_gained([1, 1, 0, 0], [1, 0, 1, 0]) == (0.25, 0.25)
    assert lost_and_gained([1, 1, 1, 1], [1, 1, 1, 0]) == (0.25, 0.0)
    with pytest.raises(ValueError):
        lost_and_gained([1], [1, 0])
