"""bench.scale_real's derived figures: within-run latency ratios, per scale, from whatever results are present."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def speed_ratios():
    from bench.scale_real import speed_ratios as fn

    return fn


def _r(p50: float) -> dict:
    return {"metrics": {"latency_ms_p50": p50, "gold_passage_top1": 0.5}}


def test_ratios_are_per_scale_and_skip_pairs_not_measured(speed_ratios) -> None:
    results = {
        "1000k/dhr: large default (auto)": _r(10.0),
        "1000k/dense (flat exact)": _r(80.0),
        "1000k/dhr: today's default (hybrid-max, Flat)": _r(100.0),
        "200k/dhr: large default (auto)": _r(12.0),
        "200k/dense (flat exact)": _r(36.0),
        "20k/bm25": _r(2.0),  # no pair at this scale
        "synthetic-5000000": {"p50": 24.0},  # not a scale/method key
    }
    got = speed_ratios(results)
    assert got == {
        "1000k/speed": {"large default p50 / flat dense p50": 0.125, "large default p50 / today's default p50": 0.1},
        "200k/speed": {"large default p50 / flat dense p50": 0.3333},
    }
    assert speed_ratios({**results, **got}) == got  # the ratios already in the JSON do not feed themselves
