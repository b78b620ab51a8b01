"""The set parser's optional model endpoint against a fake OpenAI-compatible server on 127.0.0.1 (never the network)."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import helpers
import pytest

from hiera.builds import open_collection
from hiera.chat import ChatError
from hiera.cli import main
from hiera.errors import BadInputError
from hiera.retrieve import get_retriever
from hiera.sets.endpoint import SCHEMA, EndpointSetParser, parse_answer
from hiera.sets.expr import And, Diff
from hiera.sets.parser import PARSERS, RuleSetParser, get_parser
from hiera.spec import SET_PARSERS, method

QUERY = "Afrotropical birds found in Kenya that are not sandpipers"
ANSWERS = {
    "good": {"template": "_ that are also _ but not _", "atoms": ["Afrotropical birds", "Birds of Kenya", "Sandpipers"]},
    "badtemplate": {"template": "_ and _", "atoms": ["a", "b"]},
    "count": {"template": "_ that are not _", "atoms": ["Birds of Kenya"]},
    "repeat": {"template": "_ that are also _", "atoms": ["Birds of Kenya", "birds of kenya"]},
    "notlist": {"template": "_", "atoms": "Birds of Kenya"},
}


def _content(mode: str) -> str:
    if mode in ANSWERS:
        return json.dumps(ANSWERS[mode])
    if mode in ("fenced", "slow"):
        return "```json\n" + json.dumps(ANSWERS["good"]) + "\n```"
    return '{"template": "_", "atoms": ["unterminated'


chat = helpers.chat_fixture(_content)


def _endpoint(url: str, timeout: float = 5.0) -> EndpointSetParser:
    return EndpointSetParser(RuleSetParser(), url=url, timeout=timeout)


def test_a_valid_answer_is_the_parse_and_the_request_carries_the_schema(chat: helpers.FakeChat) -> None:
    chat.requests.clear()
    r = _endpoint(f"{chat.url}/good/v1").parse(QUERY)
    assert r.parser == "endpoint" and not r.fallback and r.notes == ()
    assert r.template == "_ that are also _ but not _"
    assert r.constraints == ["Afrotropical birds", "Birds of Kenya", "Sandpipers"]
    assert isinstance(r.expression, Diff) and isinstance(r.expression.left, And)
    first = r.expression.left.children[0]
    assert QUERY[first.span[0][0] : first.span[0][1]] == "Afrotropical birds"  # found verbatim: it gets its span
    assert QUERY[slice(*r.expression.right.span[0])] == "sandpipers"  # found case-insensitively
    assert r.expression.left.children[1].span == ()  # "Birds of Kenya" is not in the query's words: no span
    assert [(u.op, u.rule) for u in r.rules] == [("and", "endpoint-answer"), ("diff", "endpoint-answer")]
    [req] = chat.requests
    assert req["path"] == "/good/v1/chat/completions"
    body = req["body"]
    assert [m["role"] for m in body["messages"]] == ["system", "user"] and body["messages"][1]["content"] == QUERY
    assert body["response_format"]["json_schema"]["schema"] == SCHEMA and body["temperature"] == 0
    assert _endpoint(f"{chat.url}/fenced/v1/chat/completions").parse(QUERY).constraints == r.constraints


@pytest.mark.parametrize(
    ("mode", "says"),
    [
        ("badtemplate", "is not one of QUEST's seven"),
        ("count", "needs 2 atoms, the answer has 1"),
        ("repeat", "repeats an atom"),
        ("notlist", "not a list of strings"),
        ("notjson", "not JSON"),
        ("notchat", "not a chat-completions response"),
        ("error", "HTTP 500"),
        ("slow", "timed out"),
    ],
)
def test_failures_fall_back_to_the_rules_saying_why(chat: helpers.FakeChat, mode: str, says: str) -> None:
    r = _endpoint(f"{chat.url}/{mode}/v1", timeout=0.5).parse(QUERY)
    rules = RuleSetParser().parse(QUERY)
    assert r.parser == "rules" and r.constraints == rules.constraints and r.rules == rules.rules  # the rules' parse
    assert r.fallback_from == "endpoint" and r.to_json()["fallback"] is True and not rules.to_json()["fallback"]
    assert says in r.notes[0] and "used the rules parser" in r.notes[0] and r.notes[1:] == rules.notes


def test_endpoint_down_falls_back_and_bad_settings_are_one_line_errors() -> None:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()  # nothing listens there now
    r = _endpoint(f"http://127.0.0.1:{port}/v1", timeout=2).parse("shorebirds that are not sandpipers")
    assert r.constraints == ["shorebirds", "sandpipers"] and "failed" in r.notes[0]
    with pytest.raises(BadInputError, match="needs parser_url"):
        get_parser("endpoint")
    with pytest.raises(BadInputError, match="parser_url must be an http"):
        get_parser("endpoint", url="file:///etc/passwd")
    with pytest.raises(BadInputError, match="empty"):
        _endpoint("http://127.0.0.1:9/v1").parse("  ")


def test_parse_answer_validates() -> None:
    assert parse_answer('{"template": "_ or _", "atoms": [" Birds  of Chile", "Birds of Peru"]}') == (
        "_ or _", ["Birds of Chile", "Birds of Peru"])
    for bad in ("[]", '{"template": "_"}', '{"template": "_", "atoms": [""]}', '{"template": "_", "atoms": ["' + "x" * 201 + '"]}'):
        with pytest.raises(ChatError):
            parse_answer(bad)


def test_registry_and_parsers_agree() -> None:
    assert set(SET_PARSERS) == set(PARSERS)
    spec = method("sets")
    assert spec.param("parser").choices == SET_PARSERS
    assert spec.param("parser_url").type == "url" and not spec.param("parser_url").http  # server-side only


def test_the_sets_method_uses_the_endpoint_and_traces_a_fallback(chat: helpers.FakeChat, shared_root: Path) -> None:
    col = open_collection(shared_root)
    r = get_retriever("sets", col)
    res = r.search(QUERY, k=3, parser="endpoint", parser_url=f"{chat.url}/good/v1")
    parse = next(s for s in res.trace if s.name == "parse").detail
    assert parse["parser"] == "endpoint" and parse["constraints"] == ANSWERS["good"]["atoms"]
    res = r.search(QUERY, k=3, parser="endpoint", parser_url=f"{chat.url}/error/v1")
    parse = next(s for s in res.trace if s.name == "parse").detail
    assert parse["parser"] == "rules" and "HTTP 500" in parse["notes"][0]
    assert parse["fallback"] is True and parse["fallback_from"] == "endpoint"


def test_the_text_output_of_a_sets_search_says_the_endpoint_failed(chat: helpers.FakeChat, shared_root: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["search", str(shared_root), QUERY, "-r", "sets", "-k", "3", "--set", "parser=endpoint",
                 "--set", f"parser_url={chat.url}/error/v1"]) == 0
    notes = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("note: ")]
    assert len(notes) == 1 and "HTTP 500" in notes[0] and "used the rules parser" in notes[0]


def test_cli_parse_with_the_endpoint_and_explain(chat: helpers.FakeChat, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sets", "parse", "--parser", "endpoint", "--parser-url", f"{chat.url}/good/v1", "--json", QUERY]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["parser"] == "endpoint" and data["rules"][0]["rule"] == "endpoint-answer"
    assert main(["sets", "parse", "--explain", "Orchid genera of Brazil"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[out.index("how it was read:") + 1] == "  ∩ head-without-place-categories: 'Orchid genera of Brazil' -> [Flora of Brazil]"
    assert main(["sets", "parse", "--parser-url", f"{chat.url}/good/v1", QUERY]) == 2  # a URL without the endpoint
    assert "--parser-url is for --parser endpoint" in capsys.readouterr().err
