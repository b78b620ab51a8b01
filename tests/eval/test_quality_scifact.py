"""Quality on real data: BM25 on BEIR SciFact must reproduce the published figure.

BM25 needs no encoding, so this runs in seconds and stays in the default
suite; the dense/hybrid SciFact figures are in ``bench/beir_scifact.py``.
"""

from __future__ import annotations

from pathlib import Path

import helpers
import pytest

from hiera.builds import open_collection
from hiera.collection import Collection
from hiera.eval.questions import load_questions
from hiera.eval.run import evaluate_retriever
from hiera.index.build import BuildOptions


@pytest.fixture(scope="module")
def scifact(data_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Collection, list]:
    root = helpers.build_collection(tmp_path_factory.mktemp("scifact") / "c", files=[data_dir / "beir" / "scifact" / "corpus.jsonl"],
                                    fmt="beir", options=BuildOptions(dense=False, progress=False))
    questions = load_questions(data_dir / "beir" / "scifact", "beir")
    return open_collection(root), questions


def test_bm25_scifact_ndcg_matches_published(scifact: tuple[Collection, list]) -> None:
    col, questions = scifact
    m = evaluate_retriever(col, "bm25-doc", questions, (10, 100), progress=False, latency_sample=0).metrics
    # BEIR paper: BM25 nDCG@10 = 0.665 (Anserini, title + text, k1 0.9, b 0.4).
    assert m["ndcg@10"] == pytest.approx(0.665, abs=0.02)
    assert m["recall@100"] > 0.85


def test_bm25_passages_max_is_close_to_whole_documents(scifact: tuple[Collection, list]) -> None:
    col, questions = scifact
    m = evaluate_retriever(col, "bm25", questions, (10, 100), progress=False, latency_sample=0).metrics
    assert 0.55 < m["ndcg@10"] < 0.75
