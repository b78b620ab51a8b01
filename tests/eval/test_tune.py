"""λ/top_docs grid search and the hybrid-max α: results agree with a direct evaluation and land beside the build."""

from __future__ import annotations

import json

import helpers
import pytest

from hiera.builds import open_collection
from hiera.errors import BadInputError
from hiera.eval.match import has_answer
from hiera.eval.questions import Question
from hiera.eval.tune import save_tuned, tune_dhr, tune_doc_alpha
from hiera.index.manifest import MANIFEST
from hiera.index.publish import live_build_dir
from hiera.retrieve import get_retriever


def _questions() -> list[Question]:
    qs = helpers.tiny_questions()
    gold = {"q1": "volcanoes", "q2": "volcanoes", "q3": "volcanoes", "q4": "chess", "q5": "chess",
            "q6": "python-language", "q7": "photosynthesis", "q8": "roman-empire"}
    for q in qs:
        q.gold_docs = {gold[q.id]}
    return qs


def test_tune_dhr_agrees_with_a_direct_evaluation(col):
    qs = _questions()
    res = tune_dhr(col, qs, top_docs=(1, 3), progress=False, target_k=1, passage_alphas=(0.0, 0.5, 1.0))
    assert set(res.params) == {"lam", "top_docs", "passage_alpha"} and res.params["passage_alpha"] in (0.0, 0.5, 1.0)
    assert {g["passage_alpha"] for g in res.grid} == {0.0, 0.5, 1.0}
    assert res.params["top_docs"] in (1, 3) and 0.0 <= res.params["lam"] <= 2.0
    dhr = get_retriever("dhr", col, **res.params)
    hits = [has_answer(q.answers, dhr.search(q.text, k=1)[0].text) for q in qs]
    assert res.top1 == pytest.approx(sum(hits) / len(qs))
    assert res.target == res.top1 and res.target_k == 1
    assert max(g["top1"] for g in res.grid) == pytest.approx(res.top1)


def test_tune_on_a_build_with_removed_documents_sees_only_live_rows(col_copy):
    """After a removal (a segmented build) tuning runs, and its figures are the searches' own."""
    from hiera.builds import remove_documents

    remove_documents(col_copy, ["chess"], log=helpers.QUIET, compact_at=1.0, progress=False)  # gold of q4, q5
    col = open_collection(col_copy)
    assert col.live is not None
    qs = _questions()
    res = tune_dhr(col, qs, top_docs=(1, 3), progress=False, target_k=1, passage_alphas=(0.0, 0.5))
    dhr = get_retriever("dhr", col, **res.params)
    hits = [has_answer(q.answers, dhr.search(q.text, k=1)[0].text) for q in qs]
    assert res.top1 == pytest.approx(sum(hits) / len(qs))
    alpha, _ = tune_doc_alpha(col, qs, alphas=[0.0, 0.5, 1.0], progress=False)
    assert alpha in (0.0, 0.5, 1.0)


def test_tune_doc_alpha_and_save(col_copy, capsys):
    root = col_copy
    col = open_collection(root)
    alpha, scores = tune_doc_alpha(col, _questions(), alphas=[0.0, 0.5, 1.0], progress=False)
    assert alpha in scores and scores[alpha] == max(scores.values())
    dhr = get_retriever("dhr", col, doc_stage="hybrid-max", doc_alpha=alpha)
    top1 = [dhr.search(q.text, k=1, level="doc")[0].doc_id in q.gold_docs for q in _questions()]
    assert scores[alpha] == pytest.approx(sum(top1) / len(top1))
    build_dir = live_build_dir(root)
    manifest_before = (build_dir / MANIFEST).read_bytes()
    save_tuned(root, {"lam": 0.4, "top_docs": 3, "doc_alpha": alpha}, {"questions": "tiny"})
    assert (build_dir / MANIFEST).read_bytes() == manifest_before  # builds are immutable
    with open_collection(root) as reopened:
        fresh = get_retriever("dhr", reopened)
        assert fresh.defaults["lam"] == 0.4 and fresh.defaults["top_docs"] == 3 and fresh.defaults["doc_alpha"] == alpha
    # hiera stats shows the tuned values in force beside the build's own defaults
    from hiera.cli import main

    assert main(["stats", str(root), "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)["index"]
    assert shown["tuned"] == {"dhr": {"lam": 0.4, "top_docs": 3, "doc_alpha": alpha}} and shown["defaults"] == {}
    # the next build starts from the tuned values, and the old tuning file goes with the old build
    from hiera.index.build import BuildOptions, build

    col.close()  # an open collection keeps its build (and that build's tuning) until it lets go
    build(root, BuildOptions(progress=False), log=helpers.QUIET)
    new_dir = live_build_dir(root)
    assert new_dir != build_dir and not build_dir.with_name(build_dir.name + ".tuned.json").exists()
    assert json.loads((new_dir / MANIFEST).read_text())["defaults"]["dhr"] == {"lam": 0.4, "top_docs": 3, "doc_alpha": alpha}
    assert get_retriever("dhr", open_collection(root)).defaults["top_docs"] == 3
    with pytest.raises(BadInputError, match="gold documents"):
        tune_doc_alpha(col, helpers.tiny_questions(), progress=False)
