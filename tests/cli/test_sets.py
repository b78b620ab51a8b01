from __future__ import annotations

import argparse
import json

import pytest

from hiera.cli.sets import cmd_sets, cmd_sets_parse, register
from hiera.errors import BadInputError


def _parser() -> argparse.ArgumentParser:
    """A stand-in for hiera's main parser: the same ``add`` contract as hiera.cli."""
    p = argparse.ArgumentParser(prog="hiera")
    sub = p.add_subparsers(dest="command", required=True)

    def add(name, handler, help_):
        sp = sub.add_parser(name, help=help_, description=help_)
        sp.set_defaults(handler=handler)
        sp.add_argument("--quiet", "-q", action="store_true")
        return sp

    register(add)
    return p


def test_parse_json_from_the_handler(capsys):
    args = argparse.Namespace(query="Dutch or Swiss war films, or war films from 1945", json=True, parser="rules")
    assert cmd_sets_parse(args) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["template"] == "_ or _ or _"
    assert data["constraints"] == ["Dutch war films", "Swiss war films", "war films from 1945"]
    assert data["expression"]["op"] == "or"
    assert data["expression"]["children"][0] == {"op": "atom", "text": "Dutch war films", "span": [[0, 5], [15, 24]]}
    assert data["notes"] == [] and data["fallback"] is False


def test_parse_text_output(capsys):
    args = argparse.Namespace(query="shorebirds that are not sandpipers", json=False, parser="rules")
    assert cmd_sets_parse(args) == 0
    assert capsys.readouterr().out.splitlines() == [
        "template: _ that are not _",
        "constraints:",
        "  1. shorebirds",
        "  2. sandpipers",
        "expression: [shorebirds] \\ [sandpipers]",
    ]


def test_fallback_is_reported(capsys):
    cmd_sets_parse(argparse.Namespace(query="not comedies", json=True, parser="rules"))
    data = json.loads(capsys.readouterr().out)
    assert data["template"] == "_" and data["fallback"] is True
    assert "could not analyze" in data["notes"][0]


def test_registered_command_line(capsys):
    args = _parser().parse_args(["sets", "parse", "--json", "Novels set in Nanjing, Hebei, or Jiangsu"])
    assert args.handler(args) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["constraints"] == ["Novels set in Nanjing", "Novels set in Hebei", "Novels set in Jiangsu"]
    with pytest.raises(SystemExit):
        _parser().parse_args(["sets"])  # a sub-command is required
    with pytest.raises(SystemExit):
        _parser().parse_args(["sets", "parse", "x", "--parser", "gpt"])


def test_errors_are_hiera_errors():
    with pytest.raises(BadInputError, match="empty"):
        cmd_sets_parse(argparse.Namespace(query=" ", json=True, parser="rules"))
    with pytest.raises(BadInputError, match="sub-command"):
        cmd_sets(argparse.Namespace(sets_command=None))


def test_a_set_search_in_text_marks_the_members_and_their_support(quest: dict, capsys) -> None:
    from hiera.builds import open_collection
    from hiera.cli import main
    from hiera.retrieve import get_retriever

    query = "American physicists who were not chemists"
    res = get_retriever("sets", open_collection(quest["root"])).search(query, k=15)
    assert main(["search", str(quest["root"]), query, "-r", "sets", "-k", "15"]) == 0
    out = capsys.readouterr().out
    n = len(res.answer_set)
    assert f"answer set: {n} member{'s' if n != 1 else ''} of " in out
    heads = [ln for ln in out.splitlines() if ln[:3].strip().isdigit() and ". " in ln]
    assert [ln.endswith("∈ answer set") for ln in heads] == [h.doc_id in res.answer_set for h in res.hits]
    assert out.count("     ✓ ") == sum(len(h.support) for h in res.hits)
    for h in res.hits:  # a non-member shows its summary on one line, without the title line above it again
        if h.passage_id is None:
            body = " ".join(h.text[len(h.title) + 1:].split())
            assert f"     {body[:200]}" in out and f"     {h.title} {body[:40]}" not in out
