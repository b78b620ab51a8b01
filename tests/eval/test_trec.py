"""TREC run files: six whitespace-separated columns per line, whatever the ids hold."""

from __future__ import annotations

from pathlib import Path

from hiera.eval.questions import Question
from hiera.eval.run import RetrieverRun, write_trec
from hiera.results import Hit, Results


def test_ids_with_whitespace_stay_one_column(tmp_path: Path) -> None:
    q = Question(id="q 1\tx", text="what?", answers=["a"])
    hits = [Hit(rank=1, score=2.5, doc_id="Doc One", title="Doc One", passage_id="Doc One#0"),
            Hit(rank=2, score=1.25, doc_id="two", title="Two", passage_id="two#3")]
    run = RetrieverRun("bm25", passage_runs=[Results(query=q.text, level="passage", hits=hits, retriever="bm25")])
    (path,) = write_trec({"bm25": run}, [q], tmp_path)
    lines = [line.split() for line in path.read_text(encoding="utf-8").splitlines()]
    assert lines == [["q_1_x", "Q0", "Doc_One#0", "1", "2.500000", "hiera-bm25"],
                     ["q_1_x", "Q0", "two#3", "2", "1.250000", "hiera-bm25"]]


def test_tied_scores_are_written_strictly_falling_in_rank_order(tmp_path: Path) -> None:
    """trec_eval re-sorts ties by document id: written as ties, an RRF run would evaluate to other figures."""
    q = Question(id="q", text="what?", answers=["a"])
    scores = [0.5, 0.5, 0.5, 0.25, 0.2499999, 0.1]
    hits = [Hit(rank=i + 1, score=s, doc_id=f"z{9 - i}", title="t", passage_id=f"z{9 - i}#0")
            for i, s in enumerate(scores)]
    run = RetrieverRun("hybrid", passage_runs=[Results(query=q.text, level="passage", hits=hits, retriever="hybrid")])
    (path,) = write_trec({"hybrid": run}, [q], tmp_path)
    rows = [line.split() for line in path.read_text(encoding="utf-8").splitlines()]
    written = [float(r[4]) for r in rows]
    assert [r[2] for r in rows] == [h.passage_id for h in hits]
    assert all(a > b for a, b in zip(written, written[1:], strict=False))
    assert all(abs(w - s) <= 1e-6 * (i + 1) for i, (w, s) in enumerate(zip(written, scores, strict=True)))
    assert written[0] == 0.5 and written[5] == 0.1
