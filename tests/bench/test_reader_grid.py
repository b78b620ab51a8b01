"""The reader grid's article split (its training runs are the device's, not a test's)."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def grid():
    import bench.reader_grid as mod

    return mod


def _squad(n: int) -> dict:
    return {"version": "1.1", "data": [{"title": f"A{i}", "paragraphs": [{"context": "x", "qas": []}]} for i in range(n)]}


def test_articles_are_split_whole_disjoint_and_seeded(grid):
    data = _squad(44)
    train, held = grid.split_articles(data, 8, seed=0)
    t, h = [a["title"] for a in train["data"]], [a["title"] for a in held["data"]]
    assert len(h) == 8 and len(t) == 36 and not set(t) & set(h)
    assert sorted(t + h) == sorted(a["title"] for a in data["data"])
    assert grid.split_articles(data, 8, seed=0) == (train, held)
    assert [a["title"] for a in grid.split_articles(data, 8, seed=1)[1]["data"]] != h
    for bad in (0, 44):
        with pytest.raises(SystemExit, match="--held-out"):
            grid.split_articles(data, bad, seed=0)
