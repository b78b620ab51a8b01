from __future__ import annotations

import json
from pathlib import Path

import helpers
import pytest

from hiera.errors import BadInputError, BadRecordError
from hiera.sets.expr import And, Atom, Diff, template
from hiera.sets.queries import (
    QUEST_METADATA_FIELDS,
    Prediction,
    SetQuery,
    load_set_queries,
    read_predictions,
    write_predictions,
)

RECORDS = [
    {
        "query": "shorebirds that are not sandpipers",
        "docs": ["Killdeer", "Avocet"],
        "original_query": "<mark>Shorebirds</mark> that are not <mark>Sandpipers</mark>",
        "scores": None,
        "metadata": {"template": "_ that are not _", "domain": "animals"},
    },
    {
        "query": "American psychologists who were also philosophers, not born in the 20th century",
        "docs": ["William James"],
        "original_query": "<mark>American psychologists</mark> that are also <mark>philosophers</mark> "
        "but not <mark>People born in the 20th century</mark>",
        "scores": None,
        "metadata": {
            "template": "_ that are also _ but not _",
            "domain": "people",
            "atoms": ["American psychologists", "philosophers", "born in the 20th century"],
        },
    },
    {"query": "2004 German novels", "docs": [], "original_query": None, "metadata": {"template": "_"}},
]


def _write(path: Path, lines: list[str]) -> Path:
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.fixture
def queries_file(tmp_path: Path) -> Path:
    return _write(tmp_path / "q.jsonl", [json.dumps(RECORDS[0]), "", json.dumps(RECORDS[1]), json.dumps(RECORDS[2])])


def test_load_set_queries(queries_file: Path):
    qs = load_set_queries(queries_file)
    assert [q.line for q in qs] == [1, 3, 4]
    a, b, c = qs
    assert a == SetQuery(
        query="shorebirds that are not sandpipers",
        docs=("Killdeer", "Avocet"),
        original_query=RECORDS[0]["original_query"],
        template="_ that are not _",
        domain="animals",
        atoms=(),
        marks=("Shorebirds", "Sandpipers"),
        metadata={"template": "_ that are not _", "domain": "animals"},
        line=1,
    )
    assert b.atoms == ("American psychologists", "philosophers", "born in the 20th century")
    assert b.marks == ("American psychologists", "philosophers", "People born in the 20th century")
    assert c.docs == () and c.marks == () and c.domain is None
    assert load_set_queries(queries_file, limit=1) == [a]


def test_gold_expression(queries_file: Path):
    a, b, c = load_set_queries(queries_file)
    assert a.gold_expression() == Diff(Atom("Shorebirds"), Atom("Sandpipers"))
    gold = b.gold_expression()
    assert gold == Diff(And([Atom("American psychologists"), Atom("philosophers")]), Atom("People born in the 20th century"))
    assert template(gold) == b.template
    with pytest.raises(BadInputError, match="line 4: template '_' needs 1 atoms, got 0"):
        c.gold_expression()


def test_require_docs(queries_file: Path):
    with pytest.raises(BadRecordError, match=r"line 4: 'docs' \(the gold set\) is empty"):
        load_set_queries(queries_file, require_docs=True)


@pytest.mark.parametrize(
    "line, reason",
    [
        ("{oops", "not valid JSON"),
        ("[1, 2]", "a record must be a JSON object"),
        (json.dumps({"docs": []}), "missing or empty 'query'"),
        (json.dumps({"query": "x", "docs": "A"}), "'docs' must be a list of strings"),
        (json.dumps({"query": "x", "docs": [1]}), "'docs' must be a list of strings"),
        (json.dumps({"query": "x", "docs": [], "metadata": []}), "'metadata' must be an object"),
        (json.dumps({"query": "x", "docs": [], "metadata": {"template": 3}}), "'metadata.template' must be a string"),
        (json.dumps({"query": "x", "docs": [], "metadata": {"atoms": "a"}}), "'metadata.atoms' must be a list"),
        (json.dumps({"query": "x", "docs": ["A"], "scores": [0.5, 0.1]}), "'scores' has 2 entries for 1 docs"),
        (json.dumps({"query": "x", "docs": [], "original_query": 5}), "'original_query' must be a string"),
    ],
)
def test_malformed_lines_give_one_line_errors(tmp_path: Path, line: str, reason: str):
    path = _write(tmp_path / "bad.jsonl", [json.dumps(RECORDS[0]), line])
    with pytest.raises(BadRecordError) as info:
        load_set_queries(path)
    msg = str(info.value)
    assert msg.startswith(f"{path}: line 2: ") and reason in msg and "\n" not in msg


def test_missing_file(tmp_path: Path):
    with pytest.raises(BadInputError, match="no such file"):
        load_set_queries(tmp_path / "none.jsonl")
    with pytest.raises(BadInputError, match="limit"):
        load_set_queries(tmp_path / "none.jsonl", limit=-1)


# --- predictions ----------------------------------------------------------------------------------


def test_write_and_read_predictions(tmp_path: Path, queries_file: Path):
    a, b, _ = load_set_queries(queries_file)
    out = tmp_path / "pred.jsonl"
    n = write_predictions(
        out,
        [
            Prediction.for_query(a, [("Killdeer", 0.97), ("Dunlin", 0.5)]),
            Prediction(query=b.query, docs=[], scores=[]),
        ],
    )
    assert n == 2
    lines = out.read_text(encoding="utf-8").splitlines()
    recs = [json.loads(x) for x in lines]
    assert recs[0] == {
        "query": a.query,
        "docs": ["Killdeer", "Dunlin"],
        "original_query": a.original_query,
        "scores": [0.97, 0.5],
        "metadata": {"template": "_ that are not _", "domain": "animals"},
    }
    # what QUEST's read_examples needs: Example(**record), ExampleMetadata(**record["metadata"])
    for r in recs:
        assert set(r) == {"query", "docs", "original_query", "scores", "metadata"}
        assert isinstance(r["metadata"], dict) and set(r["metadata"]) <= set(QUEST_METADATA_FIELDS)
    back = read_predictions(out)
    assert list(back) == [a.query, b.query]
    assert list(back[a.query].docs) == ["Killdeer", "Dunlin"] and back[b.query].docs == ()
    assert not list(tmp_path.glob("*.tmp"))


def test_write_predictions_is_atomic_and_checks_first(tmp_path: Path):
    out = tmp_path / "pred.jsonl"
    write_predictions(out, [Prediction("q1", ["A"], [0.5])])
    before = out.read_bytes()
    bad_batches = [
        [Prediction("q1", ["A"]), Prediction("q1", ["B"])],  # QUEST keys predictions by query text
        [Prediction("q2", ["A", "B"], [0.5])],
        [Prediction("q3", ["A"], [float("inf")])],
        [Prediction(" ", ["A"])],
    ]
    for batch in bad_batches:
        with pytest.raises(BadInputError):
            write_predictions(out, batch)
        assert out.read_bytes() == before
        assert not list(tmp_path.glob("*.tmp"))


def test_read_predictions_rejects_repeats(tmp_path: Path):
    rec = {"query": "q", "docs": ["A"], "scores": None, "metadata": {}}
    path = _write(tmp_path / "p.jsonl", [json.dumps(rec), json.dumps(rec)])
    with pytest.raises(BadRecordError, match="line 2: query 'q' is predicted twice"):
        read_predictions(path)


def test_real_dev_file(data_dir: Path):
    path = data_dir / "quest-vital" / "dev.jsonl"
    if not path.is_file():
        pytest.skip(f"{path} not found")
    qs = load_set_queries(path, require_docs=True)
    assert len(qs) == helpers.nonblank_lines(path)  # every record, each with its gold documents
    for q in qs:
        assert template(q.gold_expression()) == q.template
        assert len(q.atoms) == len(q.marks)
