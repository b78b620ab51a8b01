"""Model directories load safetensors only; JSON metadata is schema-checked with the bad field named."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import helpers
import pytest

from hiera.cli import main
from hiera.encode import DEFAULT_MODEL, Encoder, resolve_model_path
from hiera.errors import HieraError, ManifestMismatchError
from hiera.models import TRUST_ENV, check_weights


def _pickle_model(tmp_path: Path, sub: str = "") -> Path:
    """A copy of MiniLM whose weights (or one module's) are a pickle file instead of safetensors."""
    model = tmp_path / "pickled"
    shutil.copytree(resolve_model_path(DEFAULT_MODEL), model)
    folder = model / sub if sub else model
    folder.mkdir(exist_ok=True)
    for f in folder.glob("*.safetensors"):
        f.unlink()
    (folder / "pytorch_model.bin").write_bytes(b"\x80\x04not really a pickle")
    return model


def test_check_weights(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(TRUST_ENV, raising=False)
    check_weights(resolve_model_path(DEFAULT_MODEL))  # safetensors: fine
    model = _pickle_model(tmp_path)
    with pytest.raises(HieraError, match=r"pytorch_model.bin: pickle weights .* --trust-pickle") as e:
        check_weights(model)
    assert "\n" not in str(e.value)
    check_weights(model, trust=True)
    monkeypatch.setenv(TRUST_ENV, "1")
    check_weights(model)
    with pytest.raises(HieraError):  # an explicit flag wins over the environment
        check_weights(model, trust=False)


def test_a_module_folder_with_pickle_weights_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(TRUST_ENV, raising=False)
    model = _pickle_model(tmp_path, sub="2_Dense")
    (model / "model.safetensors").write_bytes(b"")  # the main weights are fine …
    with pytest.raises(HieraError, match="2_Dense/pytorch_model.bin"):  # … a module's are not
        check_weights(model)
    # trainer state beside safetensors is not model weights
    ok = tmp_path / "ok"
    ok.mkdir()
    (ok / "model.safetensors").write_bytes(b"")
    (ok / "training_args.bin").write_bytes(b"")
    check_weights(ok)


def test_encoder_and_reranker_refuse_pickles(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from hiera.crossencoder import Reranker

    monkeypatch.delenv(TRUST_ENV, raising=False)
    model = _pickle_model(tmp_path)
    for load in (Encoder, Reranker):
        with pytest.raises(HieraError, match="safetensors only"):
            load(model)
    # trusted, it gets past the check and fails on the (fake) weights themselves, still in one line
    with pytest.raises(HieraError, match="cannot load model"):
        Encoder(model, trust_pickle=True)


def test_cli_trust_flag(tmp_path: Path, capsys, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(TRUST_ENV, raising=False)
    model = _pickle_model(tmp_path)
    root = tmp_path / "c"
    from hiera.corpus.store import CorpusStore

    CorpusStore(root, create=True).ingest(helpers.make_docs()[:1])
    assert main(["build", str(root), "--passage-encoder", str(model), "--doc-encoder", str(model), "-q"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "pickle weights" in err[0] and "--trust-pickle" in err[0]
    assert main(["build", str(root), "--passage-encoder", str(model), "--doc-encoder", str(model), "-q",
                 "--trust-pickle"]) == 2
    err = capsys.readouterr().err
    assert "pickle weights" not in err and "cannot load model" in err  # the flag let it through to the loader


# -- schemas ------------------------------------------------------------------------------------------------
def test_tuning_file_is_schema_checked(tmp_path: Path) -> None:
    from hiera.index.manifest import read_tuned, tuned_path

    build_dir = tmp_path / "builds" / "b1"
    build_dir.mkdir(parents=True)
    for data, field in (({"params": {"dhr": 3}}, "params.dhr"), ({"params": []}, "params"), ({}, "params"),
                        ([1, 2], "(top level)"), ({"params": {}, "meta": "x"}, "meta")):
        tuned_path(build_dir).write_text(json.dumps(data))
        with pytest.raises(ManifestMismatchError, match=re.escape(f"field {field}")):
            read_tuned(build_dir)
    tuned_path(build_dir).write_text(json.dumps({"build": "b1", "params": {"dhr": {"lam": 0.5}}}))
    assert read_tuned(build_dir) == {"dhr": {"lam": 0.5}}


def test_reranker_metadata_is_schema_checked(tmp_path: Path) -> None:
    from hiera.crossencoder import META_FILE, Reranker

    model = tmp_path / "rr"
    shutil.copytree(helpers.tiny_classifier(), model)  # a cross-encoder (its scoring head untrained)
    for meta, message in (('{"threshold": "high"}', "field threshold must be a finite number"),
                          ('{"threshold": 7}', "field threshold must be a number <= 1"),
                          ('{"threshold": 0.5, "dev": []}', "field dev must be an object"),
                          ("\xff{", "is corrupt")):
        (model / META_FILE).write_bytes(meta.encode("latin-1"))
        with pytest.raises(HieraError, match=message):
            Reranker(model)
