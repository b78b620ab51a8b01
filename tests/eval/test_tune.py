"""λ/k1 grid search and the hybrid-max α: results agree with a direct evaluation and land in the manifest."""

from __future__ import annotations

import helpers
import pytest

from hiera.collection import Collection
from hiera.errors import BadInputError
from hiera.eval.match import has_answer
from hiera.eval.questions import Question
from hiera.eval.tune import save_defaults, tune_dhr, tune_doc_alpha
from hiera.retrieve import get_retriever


def _questions() -> list[Question]:
    qs = helpers.tiny_questions()
    gold = {"q1": "volcanoes", "q2": "volcanoes", "q3": "volcanoes", "q4": "chess", "q5": "chess",
            "q6": "python-language", "q7": "photosynthesis", "q8": "roman-empire"}
    for q in qs:
        q.gold_docs = {gold[q.id]}
    return qs


def test_tune_dhr_agrees_with_a_direct_evaluation(shared_root):
    col = Collection(shared_root)
    qs = _questions()
    res = tune_dhr(col, qs, k1s=(1, 3), progress=False, target_k=1)
    assert res.k1 in (1, 3) and 0.0 <= res.lam <= 2.0
    dhr = get_retriever("dhr", col, lam=res.lam, k1=res.k1)
    hits = [has_answer(q.answers, dhr.search(q.text, k=1)[0].text) for q in qs]
    assert res.top1 == pytest.approx(sum(hits) / len(qs))
    assert res.target == res.top1 and res.target_k == 1
    assert max(g["top1"] for g in res.grid) == pytest.approx(res.top1)


def test_tune_doc_alpha_and_save(shared_root, tmp_path):
    root = helpers.copy_collection(shared_root, tmp_path / "col")
    col = Collection(root)
    alpha, scores = tune_doc_alpha(col, _questions(), alphas=[0.0, 0.5, 1.0], progress=False)
    assert alpha in scores and scores[alpha] == max(scores.values())
    dhr = get_retriever("dhr", col, doc_stage="hybrid-max", doc_alpha=alpha)
    top1 = [dhr.search(q.text, k=1, level="doc")[0].doc_id in q.gold_docs for q in _questions()]
    assert scores[alpha] == pytest.approx(sum(top1) / len(top1))
    save_defaults(root, 0.4, 3, doc_alpha=alpha)
    fresh = get_retriever("dhr", Collection(root))
    assert fresh.defaults["lam"] == 0.4 and fresh.defaults["k1"] == 3 and fresh.defaults["doc_alpha"] == alpha
    with pytest.raises(BadInputError, match="gold documents"):
        tune_doc_alpha(col, helpers.tiny_questions(), progress=False)
