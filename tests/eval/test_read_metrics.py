"""The reader metrics of an evaluation: EM at each read-k, answers lost by reading more, the answerable subset."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from hiera.eval.questions import Question
from hiera.eval.read import read_hits, score_answer
from hiera.results import Hit


class ListReader:
    """Answers with the first word of the last passage it may read: reading more changes the answer."""

    def params(self, given: Any = None) -> dict[str, Any]:
        return {"part_words": 100}

    def logits(self, question: str, passages: list[tuple[str, str]], part_words: int | None = None) -> list[str]:
        return [text for _, text in passages]

    def decode(self, texts: list[str], upto: int | None = None, **_: Any) -> list[Any]:
        shown = texts[: upto or len(texts)]
        return [SimpleNamespace(text=shown[-1].split()[0])] if shown else []


def hits(*texts: str) -> list[Hit]:
    return [Hit(rank=i + 1, score=1.0, doc_id=f"d{i}", title="T", passage_id=f"d{i}#0", text=t)
            for i, t in enumerate(texts)]


def test_lost_gained_and_the_answerable_subset():
    qs = [Question("a", "q a?", ["Paris"]), Question("b", "q b?", ["Rome"]), Question("c", "q c?", ["Oslo"]),
          Question("d", "q d?", ["Lima"])]
    lists = [
        hits("Paris is big", "Berlin is big"),  # right at 1, lost at 2
        hits("Madrid is far", "Rome is old"),  # wrong at 1, gained at 2
        hits("Oslo is cold", "Oslo again"),  # right at both
        hits("Quito is high", "Bogota too"),  # the answer is in no passage: not answerable
    ]
    m, rows = read_hits(ListReader(), qs, lists, (1, 2))
    assert m["em@1"] == 0.5 and m["em@2"] == 0.5
    assert m["lost@2"] == 0.25 and m["gained@2"] == 0.25
    assert m["answerable@2"] == 0.75
    assert m["em@1_answerable"] == pytest.approx(2 / 3) and m["em@2_answerable"] == pytest.approx(2 / 3)
    assert [r["answerable"] for r in rows] == [True, True, True, False]


def test_squad_questions_with_gold_passages_report_no_answerable_subset():
    q = Question("a", "q?", ["Paris"], gold_passages={"d0#0"})
    m, _ = read_hits(ListReader(), [q], [hits("Paris is big")], (1,))
    assert m["em@1"] == 1.0 and not any(k.startswith(("answerable", "lost")) for k in m)


def test_a_regex_answer_that_does_not_compile_matches_nothing():
    q = Question("a", "Who wrote it?", ["(Charles Darwin", "Darwin"], answer_mode="regex")
    assert score_answer("Darwin", q) == (1.0, None)
    assert score_answer("Charles Darwin", q) == (0.0, None)
