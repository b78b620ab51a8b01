"""Comparing two result lists hit by hit: ids equal, scores (and stage scores) within 1e-5."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

TOL = 1e-5
QUERIES = (
    "Which eruption caused the year without a summer?",
    "volcano",
    "river delta sediment",
    "who founded the city",
    "the",
)


def hit_rows(hits: list[Any]) -> list[tuple]:
    """(doc_id, passage_id, score, {stage: (score, rank)}) from Hit objects or their JSON."""
    out = []
    for h in hits:
        d = h if isinstance(h, dict) else h.to_dict()
        stages = {k: (v["score"], v["rank"]) for k, v in d["stages"].items()}
        out.append((d["doc_id"], d["passage_id"], d["score"], stages))
    return out


def assert_same(a: list[Any], b: list[Any], what: str) -> None:
    ra, rb = hit_rows(a), hit_rows(b)
    assert [r[:2] for r in ra] == [r[:2] for r in rb], f"{what}: different hits"
    for x, y in zip(ra, rb, strict=True):
        assert abs(x[2] - y[2]) <= TOL, f"{what}: {x[:2]} scores {x[2]} vs {y[2]}"
        assert x[3].keys() == y[3].keys(), f"{what}: stages differ"
        for name in x[3]:
            assert abs(x[3][name][0] - y[3][name][0]) <= TOL, f"{what}: stage {name} of {x[:2]}"
            assert x[3][name][1] == y[3][name][1], f"{what}: stage {name} rank of {x[:2]}"


def get_json(url: str, timeout: float = 30.0) -> tuple[int, Any]:
    """``(status, JSON body)`` of a GET, error answers included (a Serve application over HTTP)."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"{}")
