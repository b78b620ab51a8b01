"""``hiera search`` on the shared collection: JSON and human output, every method."""

from __future__ import annotations

import json
from pathlib import Path

import helpers
import pytest
from helpers import run_cli

from hiera.collection import Collection
from hiera.retrieve import RETRIEVERS, get_retriever


def test_search_json(shared_root: Path, col: Collection, capsys) -> None:
    rc, out, err = run_cli(capsys, "search", str(shared_root), helpers.TOPIC_QUERIES["chess"], "--json", "-k", "3")
    assert rc == 0, err
    data = json.loads(out)
    assert data["retriever"] == "dhr" and data["level"] == "passage"
    assert data["query"] == helpers.TOPIC_QUERIES["chess"]
    assert 1 <= len(data["hits"]) <= 3
    hit = data["hits"][0]
    assert hit["doc_id"] == "chess" and hit["rank"] == 1
    assert hit["passage_id"].startswith("chess#")
    assert hit["breadcrumb"].startswith("Chess")
    assert set(hit["stages"]) == {"doc", "passage", "dense", "bm25"}  # the hybrid passage stage and its parts
    # the parameters the search ran with: the method's on this collection, "auto" resolved to the stage it chose
    dhr = get_retriever("dhr", col)
    assert data["params"] == dhr.defaults and data["params"]["doc_stage"] == "hybrid-max"
    # and they are enough to reproduce the hits from Python
    again = dhr.search(data["query"], k=3, **data["params"])
    assert [h["passage_id"] for h in data["hits"]] == [h.passage_id for h in again.hits]
    assert [s["name"] for s in data["trace"]][0] == "encode-query"


@pytest.mark.parametrize("retriever", RETRIEVERS)
def test_search_every_retriever(shared_root: Path, capsys, retriever: str) -> None:
    rc, out, err = run_cli(capsys, "search", str(shared_root), helpers.TOPIC_QUERIES["jazz"], "-r", retriever, "--json", "-k", "2")
    assert rc == 0, err
    data = json.loads(out)
    assert data["retriever"] == retriever
    assert data["hits"] and data["hits"][0]["doc_id"] == "jazz"


def test_search_human_output_has_breadcrumbs(shared_root: Path, capsys) -> None:
    q = "shield volcanoes with broad gentle slopes of basaltic lava"
    rc, out, err = run_cli(capsys, "search", str(shared_root), q, "-r", "bm25", "-k", "2")
    assert rc == 0, err
    assert out.startswith("bm25 · passage · 2 results · ")
    assert "  1. Volcanoes › Types of volcanoes › Shield volcanoes    [" in out
    assert "Mauna Loa" in out
    rc, out, _ = run_cli(capsys, "search", str(shared_root), q, "-r", "dhr", "--level", "doc", "-k", "2",
                         "--set", "lambda=0.5", "--set", "top_docs=3")
    assert rc == 0
    assert "  1. Volcanoes › Types of volcanoes › Shield volcanoes" not in out  # doc hits have no section
    assert "  1. Volcanoes    [" in out


class _FakeModel:
    def __init__(self) -> None:
        self.closed = False

    def close(self) -> None:
        self.closed = True


@pytest.mark.parametrize("argv,starts", [
    (["search", "COL", "who?", "-r", "linking"], True),
    (["search", "COL", "who?", "--retriever=linking", "-k", "3"], True),
    (["search", "COL", "who?", "-rlinking"], True),
    (["search", "COL", "who?"], False),  # dhr by default
    (["search", "COL", "who?", "-r", "bm25"], False),
    (["eval", "COL", "-r", "linking"], False),
    ([], False),
])
def test_search_starts_spacy_before_the_parser_only_for_a_method_that_loads_it(
        monkeypatch: pytest.MonkeyPatch, argv: list[str], starts: bool) -> None:
    from hiera.cli import search
    from hiera.link.nlp import SpacyModel

    made: list[_FakeModel] = []
    monkeypatch.setattr(SpacyModel, "beside", classmethod(lambda cls: made.append(_FakeModel()) or made[-1]))
    got = search.start_early(argv)
    assert (got is not None) == starts and len(made) == int(starts)


def test_a_cold_linking_search_parses_in_a_child_and_answers_as_in_process(shared_root: Path, col: Collection) -> None:
    """A fresh process (no spaCy loaded) takes the child-process path; its hits are the in-process ones."""
    import subprocess
    import sys

    q = "Who played chess against Deep Blue?"
    done = subprocess.run([sys.executable, "-m", "hiera", "search", str(shared_root), q, "-r", "linking", "--json", "-k", "5"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    cold = json.loads(done.stdout)
    here = get_retriever("linking", col).search(q, k=5)
    assert [h["passage_id"] for h in cold["hits"]] == [h.passage_id for h in here.hits] and cold["hits"]
    mentions = next(s for s in cold["trace"] if s["name"] == "mentions")
    assert mentions["detail"]["mentions"] == next(s for s in here.trace if s.name == "mentions").detail["mentions"]


def test_a_method_needing_an_index_the_build_left_out_says_how_to_add_it(squad_tiny, capsys) -> None:
    root, _ = squad_tiny  # built with BM25 only
    rc, out, err = run_cli(capsys, "search", str(root), "who", "-r", "dense")
    assert rc == 2 and out == ""
    assert err.strip() == (f"hiera: error: {root}: this build has no dense index (it was built without it); "
                           f"run `hiera build {root}` without --no-dense to add it")


def test_a_search_whose_passages_another_writer_removed_is_searched_again(col_copy: Path, capsys,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """A removal committed between the open and the search: the CLI searches once more on the new build, as
    hiera serve does, instead of failing."""
    import hiera.builds as builds
    from hiera.builds import remove_documents

    real_open = builds.open_collection
    opened: list[object] = []

    def open_then_another_writer_removes(*a, **k):
        col = real_open(*a, **k)
        if not opened:
            remove_documents(col_copy, ["jazz"], log=helpers.QUIET, compact_at=1.0, progress=False)
        opened.append(col)
        return col

    monkeypatch.setattr(builds, "open_collection", open_then_another_writer_removes)
    rc, out, err = run_cli(capsys, "search", str(col_copy), helpers.TOPIC_QUERIES["jazz"], "-r", "dense", "-k", "5",
                           "--json")
    assert rc == 0, err
    hits = json.loads(out)["hits"]
    assert len(opened) == 2 and hits and all(h["doc_id"] != "jazz" for h in hits)
