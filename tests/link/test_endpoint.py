"""The chat-completions decomposer against a fake OpenAI-compatible server on 127.0.0.1 (never the network)."""

from __future__ import annotations

import json
import socket

import helpers
import pytest

from hiera.errors import BadInputError
from hiera.link.endpoint import SETS, EndpointDecomposer, chat_url, parse_sets
from hiera.link.rules import RulesDecomposer

GOOD = {"sets": [[f"Fact {i}.{j} about the film." for j in range(3)] for i in range(5)]}
QUESTION = "Who directed Jaws and produced Jurassic Park?"


def _content(mode: str) -> str:
    return {
        "good": json.dumps(GOOD), "slow": json.dumps(GOOD),
        "fenced": "```json\n" + json.dumps(GOOD["sets"]) + "\n```",
        "malformed": '{"sets": [["unterminated',
    }.get(mode, "")


chat = helpers.chat_fixture(_content)


def test_good_reply_gives_five_sets_of_three_and_the_request_is_openai_shaped(chat: helpers.FakeChat, rules: RulesDecomposer) -> None:
    chat.requests.clear()
    d = EndpointDecomposer(f"{chat.url}/good/v1", rules, timeout=5).decompose(QUESTION)
    assert d.source == "endpoint" and d.shape == "generated" and not d.warnings
    assert d.sentences == GOOD["sets"] and len(d.sentences) == SETS and len(d.texts()) == 15
    [req] = chat.requests
    assert req["path"] == "/good/v1/chat/completions"
    messages = req["body"]["messages"]
    assert [m["role"] for m in messages] == ["system", "user"] and messages[1]["content"] == QUESTION
    assert "5 sets of 3" in messages[0]["content"]


def test_fenced_bare_list_reply_is_accepted(chat: helpers.FakeChat, rules: RulesDecomposer) -> None:
    d = EndpointDecomposer(f"{chat.url}/fenced/v1/chat/completions", rules, timeout=5).decompose(QUESTION)
    assert d.source == "endpoint" and d.sentences == GOOD["sets"]


@pytest.mark.parametrize(
    ("mode", "says"),
    [("malformed", "not JSON"), ("notchat", "not a chat-completions response"), ("error", "500"), ("slow", "timed out")],
)
def test_failures_fall_back_to_rules_with_a_warning(chat: helpers.FakeChat, rules: RulesDecomposer, mode: str, says: str) -> None:
    d = EndpointDecomposer(f"{chat.url}/{mode}/v1", rules, timeout=0.5).decompose(QUESTION)
    assert d.source == "rules" and d.shape == "conjunction"  # the rules' answer, not an empty one
    assert [s.text for s in d.sub_questions] == ["Who directed Jaws?", "Who produced Jurassic Park?"]
    [warning] = d.warnings
    assert says in warning and "used the rules decomposer" in warning


def test_endpoint_down_falls_back(rules: RulesDecomposer) -> None:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()  # nothing listens there now
    d = EndpointDecomposer(f"http://127.0.0.1:{port}/v1", rules, timeout=2).decompose(QUESTION)
    assert d.source == "rules" and d.warnings and "failed" in d.warnings[0]


def test_parse_sets_and_urls(rules: RulesDecomposer) -> None:
    assert parse_sets('{"sets": [["a", " b  c "], "d"]}') == [["a", "b c"], ["d"]]
    for bad in ("[]", '{"sets": 3}', '{"sets": [[1, 2]]}', '{"sets": [[""]]}', "nope"):
        with pytest.raises(ValueError):
            parse_sets(bad)
    assert chat_url("http://h/v1/") == "http://h/v1/chat/completions"
    assert chat_url("http://h/v1/chat/completions") == "http://h/v1/chat/completions"
    with pytest.raises(BadInputError, match="http"):
        EndpointDecomposer("file:///etc/passwd", rules)
