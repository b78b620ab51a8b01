"""bench.reader's claims: what reading more did, and every comparison as a paired interval (synthetic scores)."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def bench_reader():
    import bench.reader as mod

    return mod


def test_reading_more_is_reported_as_lost_gained_and_a_paired_difference(bench_reader):
    sc = {"em@1": [1, 1, 0, 0, 1], "em@5": [1, 0, 1, 0, 1], "em@20": [0, 0, 1, 1, 1]}
    out = bench_reader.more_evidence(sc, [1, 5, 20])
    assert (out["lost@5"], out["gained@5"]) == (0.2, 0.2)
    assert (out["lost@20"], out["gained@20"]) == (0.4, 0.4)
    assert out["em@20-em@1"][0] == 0.0 and out["em@5-em@1"][0] == 0.0


def test_every_claimed_comparison_gets_an_interval(bench_reader):
    ks = [1, 20]
    q = lambda *x: list(x)  # noqa: E731
    scores = {
        "dhr": {"em@1": q(1, 1, 0, 1), "em@20": q(1, 1, 1, 1)},
        "dense": {"em@1": q(0, 1, 0, 1), "em@20": q(0, 1, 1, 0)},
        "dhr+tuned decoding": {"em@1": q(1, 1, 0, 1), "em@20": q(1, 1, 1, 1)},
        "dense+tuned decoding": {"em@1": q(0, 1, 0, 1), "em@20": q(0, 1, 1, 1)},
        "baseline:cpu:dhr": {"em@1": q(0, 1, 0, 0), "em@20": q(0, 1, 0, 1)},
        "baseline:cpu:dense": {"em@1": q(0, 0, 0, 1), "em@20": q(0, 1, 0, 0)},
        "baseline:other:dhr": {"em@1": q(1, 1, 0, 1), "em@20": q(0, 0, 0, 0)},
        "baseline:other:dense": {"em@1": q(0, 0, 0, 1), "em@20": q(0, 1, 0, 0)},
    }
    plan = {label: (None, ks, {}) for label in ("dhr", "dense", "dhr+tuned decoding", "dense+tuned decoding")}
    out = bench_reader.compare(scores, plan, ks, {"dhr": None, "dense": None}, tuned=True, baselines=["cpu", "other"])
    by = {c["comparison"]: c for c in out}
    assert by["dhr: EM@20 - EM@1"]["difference"] == pytest.approx(25.0)
    assert by["dhr - dense: EM@1"]["difference"] == pytest.approx(25.0)
    assert by["dhr+tuned decoding - dense+tuned decoding: EM@20"]["difference"] == pytest.approx(25.0)
    assert by["dense: tuned - own decoding, EM@20"]["difference"] == pytest.approx(25.0)
    assert by["dhr: reader - cpu, EM@1"]["difference"] == pytest.approx(50.0)
    assert by["dhr: reader - other, EM@20"]["difference"] == pytest.approx(100.0)
    assert by["dhr: other EM@20 - EM@1"]["difference"] == pytest.approx(-75.0)  # reading more, for a baseline too
    assert all(c["lo"] <= c["difference"] <= c["hi"] for c in out)
    # 4 lists x 1 deeper k, dhr-dense at 2 ks twice, tuned-own 2 runs x 2 ks, and for each of 2 baselines
    # reader-baseline 2 runs x 2 ks and the baseline's own EM@20 - EM@1 for 2 runs
    assert len(out) == 4 + 4 + 4 + 2 * (4 + 2)
