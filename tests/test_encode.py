"""The embedding cache: texts are encoded once per model, across calls and processes."""

from __future__ import annotations

import ast
import importlib.util
import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest

from hiera.encode import EmbeddingCache, Encoder, resolve_model_path, text_hash
from hiera.errors import HieraError


@pytest.fixture(scope="module")
def encoder(tmp_path_factory: pytest.TempPathFactory) -> Encoder:
    return Encoder(cache_dir=tmp_path_factory.mktemp("cache"))


def test_cache_fills_and_serves_without_reencoding(encoder: Encoder, monkeypatch: pytest.MonkeyPatch) -> None:
    texts = ["Volcanoes erupt lava.", "Chess is a board game.", "Volcanoes erupt lava."]
    first = encoder.encode_document(texts)
    assert first.shape == (3, encoder.dim)
    assert np.allclose(np.linalg.norm(first, axis=1), 1.0, atol=1e-5)
    assert np.array_equal(first[0], first[2])
    assert encoder.cache is not None and len(encoder.cache) == 2  # duplicates encoded once

    calls: list[int] = []
    real = encoder._encode
    monkeypatch.setattr(encoder, "_encode", lambda ts, **kw: calls.append(len(ts)) or real(ts, **kw))
    again = encoder.encode_document(texts + ["Jazz began in New Orleans."])
    assert calls == [1]  # only the new text
    assert np.allclose(again[:3], first, atol=1e-6)


def test_cache_persists_across_instances(encoder: Encoder, tmp_path: Path) -> None:
    cache = EmbeddingCache(tmp_path, encoder.fingerprint, encoder.dim)
    vec = np.ones(encoder.dim, dtype=np.float32)
    cache.put_many([(text_hash("x"), vec)])
    cache.close()
    reopened = EmbeddingCache(tmp_path, encoder.fingerprint, encoder.dim)
    assert np.array_equal(reopened.get_many([text_hash("x")])[text_hash("x")], vec)
    assert reopened.get_many([text_hash("y")]) == {}


def test_query_and_document_agree_on_the_same_text(encoder: Encoder) -> None:
    q = encoder.encode_query("What do volcanoes erupt?")
    d = encoder.encode_document(["Volcanoes erupt lava.", "Chess is a board game."])
    assert q.shape == (encoder.dim,)
    assert float(d[0] @ q) > float(d[1] @ q)


def test_unknown_model_is_refused_without_download(tmp_path: Path) -> None:
    with pytest.raises(HieraError, match="never downloads"):
        Encoder("some-org/some-model-that-is-not-here", cache_dir=tmp_path)


@pytest.fixture(scope="module")
def prompted_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """MiniLM with e5-style prompts in its config (weights linked, not copied)."""
    src = resolve_model_path("all-MiniLM-L6-v2")
    dst = tmp_path_factory.mktemp("prompted") / "model"
    shutil.copytree(src, dst, copy_function=os.symlink)
    config = dst / "config_sentence_transformers.json"
    data = json.loads(config.read_text(encoding="utf-8"))
    config.unlink()
    config.write_text(json.dumps({**data, "prompts": {"query": "query: ", "document": "passage: "}}), encoding="utf-8")
    return dst


def test_model_prompts_are_applied_recorded_and_keyed(prompted_model: Path, encoder: Encoder, tmp_path: Path) -> None:
    enc = Encoder(prompted_model, cache_dir=tmp_path, backend="torch")  # compared with the model's own vectors
    q, doc = "What do volcanoes erupt?", "Volcanoes erupt lava."
    raw = enc.model.encode(["query: " + q, "passage: " + doc, q, doc], normalize_embeddings=True)
    np.testing.assert_allclose(enc.encode_query(q), raw[0], atol=1e-6)
    np.testing.assert_allclose(enc.encode_document([doc])[0], raw[1], atol=1e-6)
    assert not np.allclose(enc.encode_query(q), raw[2], atol=1e-3)  # the prompt changes the vector
    info = enc.info.to_dict()
    assert (info["query_prompt"], info["document_prompt"]) == ("query: ", "passage: ")
    assert (encoder.info.query_prompt, encoder.info.document_prompt) == ("", "")
    np.testing.assert_allclose(encoder.encode_query(q), encoder.model.encode(q, normalize_embeddings=True), atol=1e-6)
    # the cache key is the prompted text: an unprompted vector under the same fingerprint is never served
    enc.cache.put_many([(text_hash(doc), raw[3])])
    np.testing.assert_allclose(enc.encode_document([doc, "Chess is a board game."])[0], raw[1], atol=1e-6)


def test_loading_a_model_leaves_transformers_logging_alone(tmp_path: Path) -> None:
    from transformers.utils import logging as hf_logging

    before = hf_logging.get_verbosity(), hf_logging.is_progress_bar_enabled()
    hf_logging.set_verbosity_warning()
    hf_logging.enable_progress_bar()
    try:
        Encoder(cache_dir=tmp_path)
        assert hf_logging.get_verbosity() == hf_logging.WARNING and hf_logging.is_progress_bar_enabled()
    finally:
        hf_logging.set_verbosity(before[0])
        (hf_logging.enable_progress_bar if before[1] else hf_logging.disable_progress_bar)()


@pytest.mark.parametrize("module", ["hiera.encode", "hiera.crossencoder", "hiera.models"])
def test_inference_does_not_import_training(module: str) -> None:
    """Every import, lazy ones inside functions included: serving must not need the train extra."""
    tree = ast.parse(Path(importlib.util.find_spec(module).origin).read_text(encoding="utf-8"))
    imported = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    imported |= {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    assert not {m for m in imported if m.startswith("hiera.train")}


def test_a_models_fingerprint_is_hashed_once_and_again_when_a_file_changes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The digest is kept on disk (a new process reads it, not 87 MB); a changed file is hashed anew."""
    import hashlib

    import hiera.encode as enc

    monkeypatch.setenv("HIERA_CACHE_DIR", str(tmp_path / "cache"))
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text('{"a": 1}', encoding="utf-8")
    (model / "model.safetensors").write_bytes(b"\x00" * 1000)
    reads: list[str] = []
    real_open = open

    def counting_open(file, *args, **kwargs):  # type: ignore[no-untyped-def]
        if str(file).startswith(str(model)):
            reads.append(str(file))
        return real_open(file, *args, **kwargs)

    monkeypatch.setattr("builtins.open", counting_open)

    def fresh() -> str:
        enc._fingerprint_files.cache_clear()  # as a new process
        return enc.model_fingerprint(model)

    first = fresh()
    assert len(reads) == 2
    expected = hashlib.sha256()
    for name in ("config.json", "model.safetensors"):
        expected.update(name.encode())
        expected.update((model / name).read_bytes())
    assert first == expected.hexdigest()
    assert fresh() == first and len(reads) == 2  # read back from the cache file: no model file opened
    (model / "model.safetensors").write_bytes(b"\x01" * 1000)  # same size, new content and modification time
    os.utime(model / "model.safetensors", ns=(1, 1))
    changed = fresh()
    assert changed != first and len(reads) == 4
