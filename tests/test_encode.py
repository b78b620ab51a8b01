"""The embedding cache: texts are encoded once per model, across calls and processes."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from hiera.encode import EmbeddingCache, Encoder, text_hash
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
