"""Paired comparisons of per-question scores: a difference of means with its bootstrap interval.

Two systems read the same questions, so their per-question scores pair up;
resampling the questions (not each system separately) gives the interval of
the difference that the question sample allows. Used wherever a benchmark
claims one setting beats another.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def paired_ci(a: Sequence[float], b: Sequence[float], rounds: int = 2000, seed: int = 0,
              level: float = 0.95) -> tuple[float, float, float]:
    """Mean of ``a - b`` over paired questions, in points (×100), with its ``level`` bootstrap interval."""
    d = np.asarray(a, dtype=np.float64) - np.asarray(b, dtype=np.float64)
    if d.ndim != 1 or len(d) == 0:
        raise ValueError("paired_ci needs two equally long, non-empty score lists")
    rng = np.random.default_rng(seed)
    boots = d[rng.integers(0, len(d), size=(rounds, len(d)))].mean(axis=1)
    tail = 100 * (1 - level) / 2
    lo, hi = np.percentile(boots, [tail, 100 - tail])
    return 100 * float(d.mean()), 100 * float(lo), 100 * float(hi)


def lost_and_gained(before: Sequence[float], after: Sequence[float]) -> tuple[float, float]:
    """Fractions of questions right ``before`` and wrong ``after`` (lost), and the reverse (gained)."""
    b = np.asarray(before, dtype=np.float64) > 0.5
    a = np.asarray(after, dtype=np.float64) > 0.5
    if b.shape != a.shape or b.size == 0:
        raise ValueError("lost_and_gained needs two equally long, non-empty score lists")
    return float((b & ~a).mean()), float((a & ~b).mean())
