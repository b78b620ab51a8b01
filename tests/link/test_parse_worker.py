"""spaCy in a child process: the same parses as in-process, answers in order, and a dead child costs nothing."""

from __future__ import annotations

import io
import json
import sys

import pytest

from hiera.errors import HieraError
from hiera.link import parse_worker
from hiera.link.nlp import SpacyModel
from hiera.link.parse_worker import ParseProcess, WorkerGone
from hiera.link.parsed import Parsed
from hiera.link.spacyload import SPACY_MODEL

TEXTS = ["Who directed the film Mirror and what else did Andrei Tarkovsky make?",
         "Which is older, the Eiffel Tower or the Statue of Liberty?"]


@pytest.fixture(scope="module")
def worker():
    w = ParseProcess(SPACY_MODEL)
    yield w
    w.close()


def test_the_child_parses_as_this_process_does(worker: ParseProcess, nlp: SpacyModel) -> None:
    first, second = worker.submit(TEXTS[0]), worker.submit(TEXTS[1])
    assert worker.result(second).to_dict() == nlp(TEXTS[1]).to_dict()  # collected out of order
    assert worker.result(first).to_dict() == nlp(TEXTS[0]).to_dict()
    assert worker.parse("").to_dict()["tokens"] == []


def test_a_killed_child_falls_back_to_this_process(nlp: SpacyModel) -> None:
    model = SpacyModel(worker=ParseProcess(SPACY_MODEL))
    assert model(TEXTS[0]).to_dict() == nlp(TEXTS[0]).to_dict()
    model._worker._proc.kill()  # noqa: SLF001 - the test kills the child
    model._worker._proc.wait()  # noqa: SLF001
    assert model(TEXTS[1]).to_dict() == nlp(TEXTS[1]).to_dict()
    assert model._worker is None  # noqa: SLF001 - parses here from now on


def test_a_closed_child_refuses_work() -> None:
    w = ParseProcess(SPACY_MODEL)
    w.close()
    with pytest.raises(WorkerGone, match="closed"):
        w.submit("a question")


def test_a_missing_model_is_the_same_one_line_error_either_way() -> None:
    with pytest.raises(HieraError, match="linking needs spaCy and its model 'no_such_model'") as here:
        SpacyModel("no_such_model")("a question")
    away = ParseProcess("no_such_model")
    try:
        with pytest.raises(HieraError) as there:
            away.parse("a question")
        assert str(there.value) == str(here.value) and "\n" not in str(there.value)
        assert away.alive  # one failed request does not end the child
    finally:
        away.close()
    assert not away.alive


def test_the_loop_answers_each_request_by_id_and_survives_a_bad_one(monkeypatch: pytest.MonkeyPatch, nlp: SpacyModel) -> None:
    monkeypatch.setattr("hiera.link.spacyload.load_spacy", lambda name: nlp.nlp)
    lines = [json.dumps({"id": 1, "text": TEXTS[0]}), "not json", json.dumps({"id": 3, "text": TEXTS[1]})]
    out = io.StringIO()
    parse_worker.serve(SPACY_MODEL, io.StringIO("\n".join(lines) + "\n"), out)
    replies = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [r.get("id") for r in replies] == [1, None, 3]
    assert "error" in replies[1]
    assert Parsed.from_dict(replies[2]["parsed"]).to_dict() == nlp(TEXTS[1]).to_dict()


def test_beside_starts_no_child_where_spacy_is_loaded(nlp: SpacyModel) -> None:
    nlp("warm")  # spaCy is in this process now
    model = SpacyModel.beside()
    assert model._worker is None  # noqa: SLF001


def test_the_child_skips_spacys_command_line_and_still_parses() -> None:
    import subprocess

    code = ("import json, sys\n"
            "from hiera.link.parse_worker import _without_spacy_cli\n"
            "from hiera.link.spacyload import load_spacy, SPACY_MODEL\n"
            "_without_spacy_cli()\n"
            "doc = load_spacy(SPACY_MODEL)('Who wrote Animal Farm?')\n"
            "print(json.dumps({'ents': [e.text for e in doc.ents], 'cli': [m for m in ('typer', 'weasel', 'httpx') "
            "if m in sys.modules]}))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out == {"ents": ["Animal Farm"], "cli": []}


def test_no_child_to_be_had_means_parsing_here(monkeypatch: pytest.MonkeyPatch, nlp: SpacyModel) -> None:
    def no_process(*args, **kwargs):
        raise OSError("Resource temporarily unavailable")

    monkeypatch.setattr(parse_worker.subprocess, "Popen", no_process)
    monkeypatch.delitem(sys.modules, "spacy")  # as in a fresh process
    model = SpacyModel.beside()
    assert model._worker is None  # noqa: SLF001
