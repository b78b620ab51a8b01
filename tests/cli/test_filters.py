"""``--filter`` on ``hiera search`` and ``hiera eval``, and the filter fields ``hiera stats`` lists."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import run_cli

from hiera.builds import open_collection
from hiera.eval.questions import load_squad


def test_search_inside_a_filter(shared_root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = run_cli(capsys, "search", str(shared_root), "eruptions and lava", "--retriever", "dense", "-k", "5",
                         "--filter", "not categories = Geology", "--json")
    res = json.loads(out)
    assert rc == 0 and res["hits"] and all(h["doc_id"] != "volcanoes" for h in res["hits"])
    step = next(s for s in res["trace"] if s["name"] == "filter")
    assert step["detail"]["filter"] == "not (categories = Geology)" and step["detail"]["documents"] == 5


@pytest.mark.parametrize(("argv", "message"), [
    (["--filter", "colour = red"], "filter: unknown field 'colour'"),
    (["--filter", "title < 3"], "filter: field 'title' is text"),
    (["--filter", "(title = a"], "filter: expected ')'"),
    (["--filter", "title = a or", "--retriever", "fetchhr"], "filter: expected a field name, found the end"),
])
def test_bad_filters_are_one_line_errors(shared_root: Path, capsys: pytest.CaptureFixture[str], argv: list[str],
                                         message: str) -> None:
    rc, out, err = run_cli(capsys, "search", str(shared_root), "lava", *argv)
    assert rc == 2 and out == "" and message in err and len(err.strip().splitlines()) == 1


def test_a_filter_matching_nothing_is_an_empty_list(shared_root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = run_cli(capsys, "search", str(shared_root), "lava", "--filter", "id = nothing", "--json")
    res = json.loads(out)
    assert rc == 0 and res["hits"] == [] and "allows nothing" in res["trace"][0]["detail"]["note"]


def test_eval_counts_gold_outside_the_filter(squad_tiny: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    root, qfile = squad_tiny
    col = open_collection(root)
    first = next(col.iter_docs()).id
    questions = load_squad(qfile, rules=col.store.rules)
    owner = {p.id: p.doc_id for _, p in col.iter_passages()}
    outside = sum(1 for q in questions if all(owner[g] != first for g in q.gold_passages))
    assert 0 < outside < len(questions)
    rc, out, _ = run_cli(capsys, "eval", str(root), "--questions", str(qfile), "--format", "squad", "--retrievers",
                         "bm25", "--ks", "1,5", "--filter", f"id = '{first}'", "--json", "--quiet",
                         "--latency-sample", "0")
    m = json.loads(out)["bm25"]
    assert rc == 0 and m["filter_gold_outside"] == outside and m["filter_gold_unknown"] == 0
    # without those questions every found gold passage still counts, over fewer questions: the rate cannot drop
    assert m["gold_passage_top5_gold_inside"] >= m["gold_passage_top5"]
    assert m["gold_passage_top5_gold_inside"] * (len(questions) - outside) == pytest.approx(
        m["gold_passage_top5"] * len(questions))
    from hiera.eval.run import RetrieverRun, markdown_table

    table = markdown_table({"bm25": RetrieverRun(name="bm25", metrics=m)})
    assert f"| {outside} | 0 |" in table and "filter_gold_* count questions" in table  # counts, not percentages


def test_stats_lists_the_filter_fields(shared_root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = run_cli(capsys, "stats", str(shared_root), "--json")
    fields = {f["field"]: f for f in json.loads(out)["filter_fields"]}
    assert rc == 0 and fields["categories"]["type"] == "list" and fields["section"]["level"] == "passage"


def test_answer_reads_only_allowed_passages(squad_tiny: tuple[Path, Path], tiny_reader: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    root, qfile = squad_tiny
    col = open_collection(root)
    last = list(col.iter_docs())[-1].id
    owner = {p.id: p.doc_id for _, p in col.iter_passages()}
    q = next(q for q in load_squad(qfile, rules=col.store.rules) if {owner[g] for g in q.gold_passages} == {last})
    rc, out, _ = run_cli(capsys, "answer", str(root), q.text, "--reader", str(tiny_reader), "-r", "bm25", "-k", "3",
                         "--json", "--filter", f"id = '{last}'")
    body = json.loads(out)
    assert rc == 0 and body["passages"] and {p["doc_id"] for p in body["passages"]} == {last}
