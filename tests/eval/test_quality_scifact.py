"""Quality on real data: BM25 on BEIR SciFact must reproduce the published figure and our recorded one.

BM25 needs no encoding, so this runs in seconds and stays in the default
suite; the dense/hybrid SciFact figures are in ``bench/beir_scifact.py``.
BM25 here is deterministic (two runs gave the same figures to the last digit),
so the bands are our recorded values (``bench/expected.yaml``'s
``scifact/bm25/*`` for whole documents) within 0.002: a change to tokenization,
scoring or passage rules that moves nDCG@10 by a fifth of a point fails.
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
    # BEIR paper: BM25 nDCG@10 = 0.665 (Anserini, title + text, k1 0.9, b 0.4); ours, recorded: 0.6762
    assert m["ndcg@10"] == pytest.approx(0.665, abs=0.02)
    assert m["ndcg@10"] == pytest.approx(0.6762, abs=0.002)
    assert m["recall@100"] == pytest.approx(0.9127, abs=0.002)


def test_the_judged_metrics_do_not_depend_on_the_ks_asked(scifact: tuple[Collection, list]) -> None:
    """ndcg@10, mrr@10 and map@100 are computed 100 deep whatever --ks is: a shallower run would change them."""
    col, questions = scifact
    deep = evaluate_retriever(col, "bm25-doc", questions, (10, 100), progress=False, latency_sample=0).metrics
    shallow = evaluate_retriever(col, "bm25-doc", questions, (1, 5), progress=False, latency_sample=0).metrics
    for name in ("ndcg@10", "mrr@10", "map@100"):
        assert shallow[name] == pytest.approx(deep[name], abs=1e-12), name


def test_bm25_passages_max_is_close_to_whole_documents(scifact: tuple[Collection, list]) -> None:
    col, questions = scifact
    m = evaluate_retriever(col, "bm25", questions, (10, 100), progress=False, latency_sample=0).metrics
    # 100-word passages, each document scored by its best one: 0.6702 / 0.9109 when measured, close to whole documents
    assert m["ndcg@10"] == pytest.approx(0.6702, abs=0.002)
    assert m["recall@100"] == pytest.approx(0.9109, abs=0.002)
