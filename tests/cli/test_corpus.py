"""``hiera stats``: what the store and the live build hold."""

from __future__ import annotations

import json
from pathlib import Path

import helpers
import pytest
from helpers import run_cli

from hiera.cli import main
from hiera.collection import Collection
from hiera.corpus.split import split_document
from hiera.corpus.store import CorpusStore


def test_stats_json(shared_root: Path, col: Collection, capsys) -> None:
    rc, out, err = run_cli(capsys, "stats", str(shared_root), "--json")
    assert rc == 0, err
    data = json.loads(out)
    expected = CorpusStore(shared_root).stats()
    for key in ("documents", "sections", "passages", "max_passage_words"):
        assert data[key] == expected[key]
    # what was ingested: every document, split into the passages the splitter makes of it
    docs = helpers.make_docs()
    assert (data["documents"], data["passages"]) == (len(docs), sum(len(split_document(d)) for d in docs))
    assert data["index"]["stale"] is False
    assert data["index"]["faiss"] == col.faiss_types  # the index kinds the live build has
    rc, out, _ = run_cli(capsys, "stats", str(shared_root))
    assert rc == 0 and f"documents: {len(docs)}" in out


@pytest.mark.parametrize("value", ["0", "-5", "ten"])
def test_max_words_below_one_is_an_argument_error(tmp_path: Path, capsys, value: str) -> None:
    src = tmp_path / "d.jsonl"
    src.write_text('{"id": "a", "title": "A", "lead": ["Some text."]}\n')
    with pytest.raises(SystemExit) as e:
        main(["ingest", str(src), "--format", "hiera-jsonl", "--index", str(tmp_path / "col"), "--max-words", value])
    err = capsys.readouterr().err
    assert e.value.code == 2 and "argument --max-words:" in err and "document" not in err
    assert not (tmp_path / "col").exists()
