"""FetchHR training: a few real steps on real SQuAD questions, then load, search, refuse a mismatch.

The command (``hiera train-fetchhr``) is tested in tests/cli/test_train.py.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from hiera.errors import BadInputError, ManifestMismatchError
from hiera.fetchhr.model import CONFIG_FILE, FetchHRModel
from hiera.index.dense import faiss_search
from hiera.retrieve import get_retriever
from hiera.train.fetchhr import FetchHRArgs, contrastive_loss, lr_lambda, train_fetchhr


def _args(**kw) -> FetchHRArgs:
    base = dict(batch_size=8, max_steps=3, save_steps=2, progress=False, learning_rate=1e-3, hard_negatives=1)
    return FetchHRArgs(**(base | kw))


@pytest.fixture(scope="module")
def trained(squad_article, tmp_path_factory) -> tuple[Path, dict]:
    out = tmp_path_factory.mktemp("fetchhr-model") / "heads"
    report = train_fetchhr(squad_article["root"], squad_article["questions"], out, _args(), log=lambda m: None)
    return out, report


def test_trains_publishes_and_records_metadata(trained, squad_article) -> None:
    out, report = trained
    assert sorted(p.name for p in out.iterdir()) == ["fetchhr.json", "hiera-train.json", "rnets.safetensors"]
    saved = json.loads((out / "hiera-train.json").read_text())
    assert saved["steps"] == 3 and saved["layers"] == [1, 2, 3, 4, 5, 6]
    assert saved["peak_rss_mb"] > 0 and saved["train_seconds"] > 0 and saved["examples"]["kept"] > 8
    assert saved["device"] == "cpu" and saved["steps_per_second"] > 0 and saved["mixed_precision"] == "none"
    assert saved["args"]["learning_rate"] == 1e-3
    cfg = json.loads((out / CONFIG_FILE).read_text())
    assert cfg["passage_fingerprint"] == squad_article["col"].manifest.models["passage"]["fingerprint"]
    assert not out.with_name(out.name + ".partial").exists()


def test_heads_load_with_the_passage_index_dimension_and_unit_norm(trained, squad_article) -> None:
    out, _ = trained
    model = FetchHRModel.load(out)
    vecs = model.query_vectors([q.text for q in squad_article["questions"][:3]], model.layers)
    dim = squad_article["col"].passage_vectors.shape[1]
    for n in model.layers:
        assert vecs[n].shape == (3, dim)
        np.testing.assert_allclose(np.linalg.norm(vecs[n], axis=1), 1.0, rtol=1e-5)
    # three steps moved the heads off their identity start (the mean-pooled layer)
    free = FetchHRModel.mean_pooled(model.encoder).query_vectors([squad_article["questions"][0].text], [1])[1]
    assert not np.allclose(free, vecs[1][:1], atol=1e-4)


def test_trained_model_searches_with_layer_provenance(trained, squad_article) -> None:
    out, _ = trained
    r = get_retriever("fetchhr", squad_article["col"], model=str(out))
    assert squad_article["col"].n_passages >= 6
    res = r.search(squad_article["questions"][0].text, k=6, k_per_layer="1")
    assert len({h.passage_id for h in res.hits}) == 6
    assert sorted({next(iter(h.stages)) for h in res.hits}) == [f"layer{n}" for n in range(1, 7)]


def test_last_layer_queries_with_the_encoders_own_vector_by_default(trained, squad_article) -> None:
    out, _ = trained
    col = squad_article["col"]
    q = squad_article["questions"][0].text
    r = get_retriever("fetchhr", col, model=str(out))
    dense = get_retriever("dense", col).search(q, k=5)
    own = r.search(q, k=5, single_layer=6)
    assert [h.passage_id for h in own.hits] == [h.passage_id for h in dense.hits]
    np.testing.assert_allclose([h.score for h in own.hits], [h.score for h in dense.hits], atol=1e-4)
    model = FetchHRModel.load(out, col.passage_encoder)
    vecs = model.query_vectors([q], [1, 6], own_last=True)
    np.testing.assert_allclose(vecs[6][0], col.passage_encoder.encode_query([q])[0], atol=1e-5)
    np.testing.assert_allclose(vecs[1], model.query_vectors([q], [1])[1], atol=1e-6)  # other layers keep their heads
    head_vec = model.query_vectors([q], [6])[6]
    assert not np.allclose(head_vec[0], vecs[6][0], atol=1e-4)  # the head is not the encoder's vector
    ids, sc = faiss_search(col.passage_faiss, head_vec, 5)
    head = r.search(q, k=5, single_layer=6, last_layer="head")
    assert [h.passage_id for h in head.hits] == [p.id for p in col.passages_at(ids[0])]
    np.testing.assert_allclose([h.score for h in head.hits], sc[0], rtol=1e-5)


def test_a_mismatched_passage_encoder_is_refused(trained, squad_article, tmp_path) -> None:
    out, _ = trained
    other = tmp_path / "other"
    shutil.copytree(out, other)
    cfg = json.loads((other / CONFIG_FILE).read_text())
    cfg["passage_fingerprint"] = "0" * 64
    (other / CONFIG_FILE).write_text(json.dumps(cfg))
    r = get_retriever("fetchhr", squad_article["col"], model=str(other))
    with pytest.raises(ManifestMismatchError) as e:
        r.search("Who won Super Bowl 50?", k=6)
    assert "trained against passage encoder 000000000000" in str(e.value) and "\n" not in str(e.value)


def test_rerun_resumes_from_the_checkpoint(trained, squad_article) -> None:
    out, _ = trained
    report = train_fetchhr(squad_article["root"], squad_article["questions"], out, _args(), log=lambda m: None)
    assert report["resumed_from"] and report["steps"] == 3 and report["examples"]["reused"]


@pytest.mark.parametrize(
    ("kw", "needle"),
    [
        ({"batch_size": 1}, "batch-size"),
        ({"layers": "7"}, "layer 7 is not one"),
        ({"layers": "0"}, "layer 0 is not one"),
        ({"warmup_ratio": 1.0}, "warmup-ratio"),
        ({"hard_negatives": -1}, "hard-negatives"),
    ],
)
def test_bad_arguments_are_one_line_errors(squad_article, tmp_path, kw: dict, needle: str) -> None:
    with pytest.raises(BadInputError) as e:
        train_fetchhr(squad_article["root"], squad_article["questions"], tmp_path / "x", _args(**kw), log=lambda m: None)
    assert needle in str(e.value) and "\n" not in str(e.value)


def test_loss_masks_a_shared_positive_and_schedule_warms_then_decays() -> None:
    import torch

    q = torch.nn.functional.normalize(torch.tensor([[1.0, 0.0], [0.0, 1.0]]), dim=-1)
    cands = torch.tensor([[1.0, 0.0], [1.0, 0.0]])
    # both rows' positive is passage 7: row 1 must not be pushed away from row 0's copy of its own positive
    same = contrastive_loss(q, cands, torch.tensor([7, 7]), 2, 20.0)
    diff = contrastive_loss(q, cands, torch.tensor([7, 8]), 2, 20.0)
    assert same < diff
    f = lr_lambda(10, 2)
    assert f(0) == 0.5 and f(1) == 1.0 and f(2) == 1.0 and f(6) == 0.5 and f(10) == 0.0
