"""``sets`` inside a filter: every constraint's candidates are allowed documents, so the answer set lies inside it."""

from __future__ import annotations

import json

from hiera.collection import Collection
from hiera.index.filters import compile_filter
from hiera.retrieve import get_retriever


def test_the_filter_intersects_every_set(quest: dict, quest_col: Collection) -> None:
    queries = [json.loads(line)["query"] for line in quest["queries"].read_text(encoding="utf-8").splitlines()[:3]]
    r = get_retriever("sets", quest_col)
    plain = r.batch_search(queries, 20)
    same = r.batch_search(queries, 20, filter="not id = nothing")
    assert [x.answer_set for x in plain] == [y.answer_set for y in same]
    for res in plain:
        assert res.answer_set, res.query
        dropped = res.answer_set[: max(1, len(res.answer_set) // 2)]
        expr = "not id in (" + ", ".join(json.dumps(d) for d in dropped) + ")"
        allowed = {d.id for d in quest_col.docs_at(compile_filter(quest_col, expr).doc_positions)}
        got = r.search(res.query, 20, filter=expr)
        assert set(got.answer_set or []) <= allowed and not set(got.answer_set or []) & set(dropped)
        assert all(h.doc_id in allowed for h in got.hits)
        step = next(s for s in got.trace if s.name == "filter")
        assert step.detail["documents"] == quest_col.n_docs - len(dropped)
