"""CLI smoke tests on the shared tiny collection: search, stats, and one-line errors."""

from __future__ import annotations

import json
from pathlib import Path

import helpers
import pytest

from hiera.cli import main
from hiera.corpus.store import CorpusStore
from hiera.retrieve import RETRIEVERS


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HIERA_CACHE_DIR", str(helpers.session_cache_dir(tmp_path_factory)))
        return helpers.shared_collection(tmp_path_factory)


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def test_search_json(root: Path, capsys) -> None:
    rc, out, err = _run(capsys, "search", str(root), helpers.TOPIC_QUERIES["chess"], "--json", "-k", "3")
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
    assert data["params"] == {"lam": 1.75, "top_docs": 100, "doc_stage": "hybrid-max", "doc_alpha": 0.35, "passage_alpha": 0.3}
    assert [s["name"] for s in data["trace"]][0] == "encode-query"


@pytest.mark.parametrize("retriever", RETRIEVERS)
def test_search_every_retriever(root: Path, capsys, retriever: str) -> None:
    rc, out, err = _run(capsys, "search", str(root), helpers.TOPIC_QUERIES["jazz"], "-r", retriever, "--json", "-k", "2")
    assert rc == 0, err
    data = json.loads(out)
    assert data["retriever"] == retriever
    assert data["hits"] and data["hits"][0]["doc_id"] == "jazz"


def test_search_human_output_has_breadcrumbs(root: Path, capsys) -> None:
    q = "shield volcanoes with broad gentle slopes of basaltic lava"
    rc, out, err = _run(capsys, "search", str(root), q, "-r", "bm25", "-k", "2")
    assert rc == 0, err
    assert out.startswith("bm25 · passage · 2 results · ")
    assert "  1. Volcanoes › Types of volcanoes › Shield volcanoes    [" in out
    assert "Mauna Loa" in out
    rc, out, _ = _run(capsys, "search", str(root), q, "-r", "dhr", "--level", "doc", "-k", "2", "--set", "lambda=0.5", "--set", "top_docs=3")
    assert rc == 0
    assert "  1. Volcanoes › Types of volcanoes › Shield volcanoes" not in out  # doc hits have no section
    assert "  1. Volcanoes    [" in out


def test_stats_json(root: Path, capsys) -> None:
    rc, out, err = _run(capsys, "stats", str(root), "--json")
    assert rc == 0, err
    data = json.loads(out)
    expected = CorpusStore(root).stats()
    for key in ("documents", "sections", "passages", "max_passage_words"):
        assert data[key] == expected[key]
    assert (data["documents"], data["passages"]) == (6, 34)
    assert data["index"]["stale"] is False
    assert data["index"]["faiss"] == {"passage": "Flat", "doc": "Flat"}
    rc, out, _ = _run(capsys, "stats", str(root))
    assert rc == 0 and "documents: 6" in out


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["search", "{root}", "   "], "empty"),
        (["search", "{root}", "q", "-k", "0"], "k must be"),
        (["search", "{root}", "q", "--set", "lambda=-1"], "lambda (= lam)=-1"),
        (["search", "{root}", "q", "--set", "fusion=rrf"], "no parameter 'fusion' in dhr"),
        (["search", "{root}", "q", "--set", "lam"], "NAME=VALUE"),
        (["search", "{root}", "q", "-r", "hybrid", "--set", "fusion=max"], "fusion=max must be one of rrf, interp"),
        (["eval", "{root}", "--questions", "{missing}", "--format", "squad", "--set", "doc_alpha=2"], "doc_alpha=2"),
        (["search", "{missing}", "q"], "not a hiera collection"),
        (["stats", "{missing}"], "not a hiera collection"),
        (["search", "{root}", "q", "--passage-encoder", "{missing}"], "not a local directory"),
    ],
)
def test_user_errors_are_one_line(root: Path, tmp_path: Path, capsys, argv: list[str], needle: str) -> None:
    args = [a.format(root=root, missing=tmp_path / "missing") for a in argv]
    rc, out, err = _run(capsys, *args)
    assert rc == 2
    assert out == ""
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("hiera: error: ") and needle in lines[0]


def test_tune_target_k(root: Path, tmp_path: Path, capsys) -> None:
    qfile = tmp_path / "qs.jsonl"
    qfile.write_text("".join(json.dumps({"question": q.text, "answer": q.answers}) + "\n" for q in helpers.tiny_questions()))
    base = ["tune", str(root), "--questions", str(qfile), "--format", "nq-open", "--grid", "top_docs=1,3", "--dry-run", "--quiet"]
    rc, out, err = _run(capsys, *base, "--target-k", "1")
    assert rc == 0, err
    data = json.loads(out)
    # the reported top-1 is what searching with the chosen parameters gets, question by question
    from hiera.builds import open_collection
    from hiera.eval.match import has_answer
    from hiera.retrieve import get_retriever

    qs = helpers.tiny_questions()
    runs = get_retriever("dhr", open_collection(root)).batch_search([q.text for q in qs], k=1, **data["params"])
    found = [has_answer(q.answers, r.hits[0].text, q.answer_mode) for q, r in zip(qs, runs, strict=True)]
    assert data["top1"] == pytest.approx(sum(found) / len(qs))
    assert "top20" not in data and data["params"]["top_docs"] in (1, 3) and data["saved"] is None
    rc, out, err = _run(capsys, *base, "--target-k", "0")
    assert rc == 2 and "--target-k" in err


def test_commands_other_than_serve_do_not_import_fastapi() -> None:
    """``hiera serve`` registers with every command: its defaults must come without FastAPI (~0.4 s to import)."""
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from hiera.cli import main\n"
        "try:\n"
        "    main(['--help'])\n"
        "except SystemExit:\n"
        "    pass\n"
        "assert 'fastapi' not in sys.modules, 'fastapi imported'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, timeout=120)
