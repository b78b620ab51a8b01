"""The chat-completions decomposer against a fake OpenAI-compatible server on 127.0.0.1 (never the network)."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from hiera.errors import BadInputError
from hiera.link.endpoint import SETS, EndpointDecomposer, chat_url, parse_sets
from hiera.link.rules import RulesDecomposer

GOOD = {"sets": [[f"Fact {i}.{j} about the film." for j in range(3)] for i in range(5)]}
QUESTION = "Who directed Jaws and produced Jurassic Park?"


class FakeOpenAI(BaseHTTPRequestHandler):
    """``/<mode>/v1/chat/completions``: good, fenced, malformed, notchat, error, slow."""

    requests: list[dict] = []

    def log_message(self, *args) -> None:  # quiet
        pass

    def do_POST(self) -> None:  # noqa: N802 - http.server's naming
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        FakeOpenAI.requests.append({"path": self.path, "body": body})
        mode = self.path.split("/")[1]
        if mode == "slow":
            time.sleep(1.5)
        if mode == "error":
            self.send_response(500)
            self.end_headers()
            self.wfile.write(b"internal error")
            return
        content = {
            "good": json.dumps(GOOD), "slow": json.dumps(GOOD),
            "fenced": "```json\n" + json.dumps(GOOD["sets"]) + "\n```",
            "malformed": '{"sets": [["unterminated',
        }.get(mode, "")
        reply = {"choices": [{"message": {"role": "assistant", "content": content}}]}
        if mode == "notchat":
            reply = {"result": "hello"}
        data = json.dumps(reply).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        try:
            self.wfile.write(data)
        except BrokenPipeError:  # the client timed out first (the "slow" mode)
            pass


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    srv = ThreadingHTTPServer(("127.0.0.1", 0), FakeOpenAI)
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{srv.server_address[1]}"
    srv.shutdown()
    srv.server_close()


def test_good_reply_gives_five_sets_of_three_and_the_request_is_openai_shaped(server: str, rules: RulesDecomposer) -> None:
    FakeOpenAI.requests.clear()
    d = EndpointDecomposer(f"{server}/good/v1", rules, timeout=5).decompose(QUESTION)
    assert d.source == "endpoint" and d.shape == "generated" and not d.warnings
    assert d.sentences == GOOD["sets"] and len(d.sentences) == SETS and len(d.texts()) == 15
    [req] = FakeOpenAI.requests
    assert req["path"] == "/good/v1/chat/completions"
    messages = req["body"]["messages"]
    assert [m["role"] for m in messages] == ["system", "user"] and messages[1]["content"] == QUESTION
    assert "5 sets of 3" in messages[0]["content"]


def test_fenced_bare_list_reply_is_accepted(server: str, rules: RulesDecomposer) -> None:
    d = EndpointDecomposer(f"{server}/fenced/v1/chat/completions", rules, timeout=5).decompose(QUESTION)
    assert d.source == "endpoint" and d.sentences == GOOD["sets"]


@pytest.mark.parametrize(
    ("mode", "says"),
    [("malformed", "not JSON"), ("notchat", "not a chat-completions response"), ("error", "500"), ("slow", "timed out")],
)
def test_failures_fall_back_to_rules_with_a_warning(server: str, rules: RulesDecomposer, mode: str, says: str) -> None:
    d = EndpointDecomposer(f"{server}/{mode}/v1", rules, timeout=0.5).decompose(QUESTION)
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
