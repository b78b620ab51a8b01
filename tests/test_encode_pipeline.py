"""The streaming encoder (the GPU path) on a CPU: order, batches, tokenizer workers, failures and the cache.

Every CUDA-specific step of :func:`hiera.encode.stream_batches` (pinned
copies, the copy-back stream) sits behind one small class; everything else —
length-sorted batches, tokenizer workers fed in order, a failing batch, the
cache filled beside the model — runs here on the CPU with the real model.
"""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

import helpers
import numpy as np
import pytest
import torch

from hiera import encode as encode_mod
from hiera.backends import FastTokenizer, TokenizerPool
from hiera.encode import (
    EncodeError,
    Encoder,
    StreamStats,
    model_inputs,
    stream_batches,
    stream_encode,
    text_hash,
)
from hiera.models import cuda_available

TEXTS = [
    *helpers.ENCODE_TEXTS,
    "The Treaty of Westphalia ended the Thirty Years' War in 1648.",
    "",
    "A glacier is a persistent body of dense ice that is constantly moving under its own weight. " * 40,  # truncated
    "Mount Everest is Earth's highest mountain above sea level.",
    "[PAD] is a token [SEP] written in the text itself.",
]


class FailingTokenizer:
    """A real tokenizer that fails on one marked text: a worker that raises (picklable, for worker processes)."""

    def __init__(self, inner: Any, marker: str) -> None:
        self.inner, self.marker = inner, marker

    def copy(self) -> FailingTokenizer:
        return FailingTokenizer(self.inner.copy(), self.marker)

    def __call__(self, texts: list[str]) -> dict[str, np.ndarray]:
        if self.marker in texts:
            raise ValueError("this worker cannot tokenize that")
        return self.inner(texts)


@pytest.fixture(scope="module")
def enc(tmp_path_factory: pytest.TempPathFactory) -> Encoder:
    return Encoder(backend="torch", device="cpu", cache_dir=tmp_path_factory.mktemp("cache"))


@pytest.fixture(scope="module")
def reference(enc: Encoder) -> np.ndarray:
    """sentence-transformers' own vectors of TEXTS, in order."""
    return enc.model.encode(TEXTS, normalize_embeddings=True, batch_size=4)


@pytest.fixture(scope="module")
def fast(enc: Encoder) -> FastTokenizer:
    tok = FastTokenizer.load(enc.path)
    assert tok is not None
    return tok


def test_fast_tokenizer_pads_as_sentence_transformers_does(enc: Encoder, fast: FastTokenizer) -> None:
    """Padding in numpy (no Python int per mask or type id) gives sentence-transformers' tensors, copies too."""
    for batch in (TEXTS, TEXTS[4:7], [""], TEXTS[7:8]):
        theirs = enc.model.preprocess(batch)
        for tok in (fast, fast.copy(), pickle.loads(pickle.dumps(fast))):
            ours = tok(batch)
            assert set(ours) == {k for k in theirs if hasattr(theirs[k], "shape")}
            for k, v in ours.items():
                assert v.dtype == np.int64
                np.testing.assert_array_equal(v, theirs[k].numpy(), err_msg=k)
            # the packed form the workers hand back (int32 ids and lengths), widened as on the device
            packed = tok.packed(batch)
            assert packed["ids"].dtype == np.int32 and packed["ids"].nbytes * 2 == ours["input_ids"].nbytes
            widened = model_inputs({k: torch.from_numpy(v) for k, v in packed.items()})
            assert set(widened) == set(ours)
            for k, v in widened.items():
                assert v.dtype == torch.int64
                np.testing.assert_array_equal(v.numpy(), theirs[k].numpy(), err_msg=f"packed {k}")
            # the GPU's widths: rounded up to a multiple of 16, the extra columns padding
            wide = model_inputs({k: torch.from_numpy(v) for k, v in tok.packed(batch, 16).items()})
            width = theirs["input_ids"].shape[1]
            assert wide["input_ids"].shape[1] == min(-(-width // 16) * 16, max(width, tok.max_seq_length))
            for k, v in wide.items():
                np.testing.assert_array_equal(v[:, :width].numpy(), theirs[k].numpy(), err_msg=f"wide {k}")
            assert not wide["attention_mask"][:, width:].any()


@pytest.mark.parametrize("kind", ["thread", "process"])
def test_workers_hand_batches_back_in_order(enc: Encoder, fast: FastTokenizer, reference: np.ndarray,
                                            kind: str) -> None:
    """Two workers, batches of 3 over 10 texts (the last one partial): every vector in its text's row."""
    with TokenizerPool(fast, 2, kind) as pool:
        got = stream_encode(enc.model, TEXTS, "", 3, "cpu", prefetch=4, tokenizers=pool)
        np.testing.assert_allclose(got, reference, atol=2e-6)
        seen: list[int] = []
        sizes = []
        stats = StreamStats()
        for idx, vecs in stream_batches(enc.model, TEXTS, "", 3, "cpu", 2, pool, stats):
            seen += idx
            sizes.append(len(idx))
            np.testing.assert_allclose(vecs, reference[idx], atol=2e-6)
    assert sorted(seen) == list(range(len(TEXTS))) and sizes == [3, 3, 3, 1]
    # where the host's time went, counted once per batch
    assert (stats.batches, stats.texts) == (4, len(TEXTS)) and 0 < stats.tokens <= stats.slots
    assert 0 < stats.wait_tokenize + stats.copy_in + stats.launch + stats.wait_device <= stats.wall
    lengths = [len(TEXTS[i]) for i in seen]
    assert lengths == sorted(lengths, reverse=True)  # longest first: little padding


def test_packed_batches_are_re_cut_by_token_count(enc: Encoder, fast: FastTokenizer, reference: np.ndarray) -> None:
    """Packed batches (as the GPU's workers hand them back) are re-cut together by token count: the same sizes,
    every vector in its text's row, the most tokens first, and less padding than the character-length batches."""
    stats = {}
    for label, tok in (("chars", fast), ("tokens", fast.packing())):
        with TokenizerPool(tok, 2) as pool:
            stats[label] = StreamStats()
            seen: list[int] = []
            sizes = []
            for idx, vecs in stream_batches(enc.model, TEXTS, "", 3, "cpu", 4, pool, stats[label]):
                seen += idx
                sizes.append(len(idx))
                np.testing.assert_allclose(vecs, reference[idx], atol=2e-6)
        assert sorted(seen) == list(range(len(TEXTS))) and sizes == [3, 3, 3, 1]
    tokens = [len(fast.tokenizer.encode(TEXTS[i]).ids) for i in seen]
    assert tokens == sorted(tokens, reverse=True)
    assert stats["tokens"].tokens == stats["chars"].tokens and stats["tokens"].slots < stats["chars"].slots


def test_empty_input_encodes_nothing(enc: Encoder, fast: FastTokenizer) -> None:
    with TokenizerPool(fast, 2) as pool:
        assert list(stream_batches(enc.model, [], "", 4, "cpu", 2, pool)) == []
        assert stream_encode(enc.model, [], "", 4, "cpu", tokenizers=pool).shape[0] == 0
    half = Encoder(backend="torch", device="cpu", precision="float16", use_cache=False)
    assert half.encode_document([]).shape == (0, half.dim)


@pytest.mark.parametrize("kind", ["thread", "process"])
def test_a_worker_that_raises_is_one_clear_error(enc: Encoder, fast: FastTokenizer, kind: str) -> None:
    marker = TEXTS[5]
    with TokenizerPool(FailingTokenizer(fast, marker), 2, kind) as pool:  # type: ignore[arg-type]
        with pytest.raises(EncodeError, match=r"tokenizing batch \d of 4 failed: ValueError: this worker cannot"):
            stream_encode(enc.model, TEXTS, "", 3, "cpu", prefetch=4, tokenizers=pool)
        # the pool is still usable: the failure ended one call, not the workers
        ok = [t for t in TEXTS if t != marker]
        assert stream_encode(enc.model, ok, "", 3, "cpu", tokenizers=pool).shape == (len(ok), enc.dim)


@pytest.mark.parametrize("packed", [False, True], ids=["one-by-one", "regrouped-in-twos"])
def test_a_failing_batch_caches_only_whole_landed_vectors(tmp_path: Path, fast: FastTokenizer, reference: np.ndarray,
                                                          monkeypatch: pytest.MonkeyPatch, packed: bool) -> None:
    """The GPU path of encode_document (float16 here): an error mid-way leaves the landed vectors, and only those.
    Packed batches are re-cut two at a time here: the failing fourth batch takes the third down with it."""
    monkeypatch.setattr(encode_mod, "CACHE_CHUNK", 2)
    monkeypatch.setattr(encode_mod, "REGROUP", 2)
    half = Encoder(backend="torch", device="cpu", precision="float16", batch_size=2, cache_dir=tmp_path)
    texts = TEXTS[:7] + TEXTS[8:]  # distinct texts
    order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
    marker = texts[order[6]]  # the fourth batch of two fails
    inner = fast.packing() if packed else fast
    half._pool = TokenizerPool(FailingTokenizer(inner, marker), 2)  # type: ignore[arg-type]
    with pytest.raises(EncodeError, match="tokenizing batch 4 of 5 failed"):
        half.encode_document(texts)
    assert half.cache is not None
    stored = half.cache.get_many([text_hash(t) for t in texts])
    landed = {text_hash(texts[i]) for i in order[: 4 if packed else 6]}
    assert set(stored) == landed  # the batches (windows) before the failure, nothing after
    half._pool.close()
    half._pool = None
    clean = Encoder(backend="torch", device="cpu", precision="float16", batch_size=2, use_cache=False)
    full = clean.encode_document(texts)
    for i, t in enumerate(texts):
        if text_hash(t) in stored:  # whole vectors, the real ones (float16: exact where batched alike)
            if packed:
                np.testing.assert_array_equal(stored[text_hash(t)], full[i])
            else:
                assert float(stored[text_hash(t)] @ full[i]) >= 0.9999
    again = half.encode_document(texts)  # the rerun encodes the rest and serves the landed ones
    if packed:
        np.testing.assert_allclose(again, full, atol=1e-6)
    else:
        assert (again * full).sum(axis=1).min() >= 0.9999
    assert len(half.cache) == len(texts)
    ref = reference[[TEXTS.index(t) for t in texts]]
    assert (again * ref).sum(axis=1).min() >= 0.9999  # float16 vectors: torch float32's within cosine 0.9999


def test_queries_run_in_float32_whatever_the_documents_precision(enc: Encoder, tmp_path: Path) -> None:
    half = Encoder(backend="torch", device="cpu", precision="float16", cache_dir=tmp_path)
    q = "Where did jazz originate?"
    np.testing.assert_array_equal(half.encode_query(q), enc.encode_query(q))
    np.testing.assert_array_equal(half.encode_query([q, "chess"]), enc.encode_query([q, "chess"]))
    assert not np.array_equal(half.encode_document(TEXTS[:2]), enc.encode_document(TEXTS[:2]))  # float16 documents
    import torch

    assert next(half.model.parameters()).dtype == torch.float32
    assert next(half.doc_model.parameters()).dtype == torch.float16


def test_the_encoder_streams_through_its_tokenizer_workers(tmp_path: Path, reference: np.ndarray) -> None:
    """Encoder on the streaming path with two worker threads: sentence-transformers' order and cosine ≥ 0.9999."""
    half = Encoder(backend="torch", device="cpu", precision="float16", batch_size=4, tokenize_workers=2,
                   cache_dir=tmp_path)
    both = half.encode_document(TEXTS + TEXTS[:3])  # a text given twice is encoded once, in both rows
    np.testing.assert_array_equal(both[len(TEXTS):], both[:3])
    assert half.cache is not None and len(half.cache) == len(TEXTS)
    got = both[: len(TEXTS)]
    pool: Any = half.tokenizer_pool()
    assert pool is not None and pool.workers == 2 and pool.kind == "thread"
    cos = (got * reference).sum(axis=1)
    assert cos.min() >= 0.9999, cos
    assert (np.argmax(got @ reference.T, axis=1) == np.arange(len(TEXTS))).all()  # each vector in its own row


def test_the_worker_kind_can_be_chosen_and_a_wrong_one_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    from hiera.errors import BadInputError

    assert Encoder(backend="torch", device="cpu", use_cache=False).tokenize_kind == "thread"
    monkeypatch.setenv("HIERA_TOKENIZE_KIND", "process")
    assert Encoder(backend="torch", device="cpu", use_cache=False).tokenize_kind == "process"
    monkeypatch.setenv("HIERA_TOKENIZE_KIND", "fibers")
    with pytest.raises(BadInputError, match="unknown tokenizer worker kind 'fibers'"):
        Encoder(backend="torch", device="cpu", use_cache=False)


@pytest.mark.skipif(not cuda_available(), reason="no CUDA device: GPU tests run on a lent GPU machine only")
def test_cuda_stream_equals_the_cpu_order_and_vectors(enc: Encoder, reference: np.ndarray, tmp_path: Path) -> None:
    gpu = Encoder(backend="torch", device="cuda", cache_dir=tmp_path, batch_size=3, tokenize_workers=2)
    got = gpu.encode_document(TEXTS)
    assert (got * reference).sum(axis=1).min() >= 0.999
    np.testing.assert_allclose(gpu.encode_query("what erupts?"), enc.encode_query("what erupts?"), atol=1e-5)


@pytest.mark.parametrize("additive", [False, True], ids=["sdpa-boolean-mask", "eager-additive-mask"])
def test_the_padded_forward_gives_sentence_transformers_vectors(enc: Encoder, additive: bool) -> None:
    """The streaming path's forward pass (a 4-D padding mask, so transformers never asks the GPU whether the batch
    is padded) returns what the model's own forward returns, on a batch with padding."""
    from hiera.encode import PaddedForward

    feats = enc.model.preprocess(TEXTS)
    assert int(feats["attention_mask"].sum()) < feats["attention_mask"].numel()  # padded
    forward = PaddedForward(enc.model)
    forward.additive = additive
    with torch.inference_mode():
        want = enc.model(dict(feats))["sentence_embedding"]
        got = forward(dict(feats))
    np.testing.assert_allclose(got.numpy(), want.numpy(), atol=2e-6)


def test_a_build_readies_a_streaming_encoder_beside_its_host_work() -> None:
    """The streaming path's encoder (float16 here, as on a GPU) is readied on a thread while a build does BM25: its
    workers started and one batch through; a CPU encoder has nothing to ready."""
    from hiera.index.build import _warm

    lines: list[str] = []
    half = Encoder(backend="torch", device="cpu", precision="float16", use_cache=False)
    future = _warm((half, half), lines.append)
    assert future is not None
    future.result(timeout=120)
    assert half._pool and half.stream_stats.batches == 1 and half.stream_stats.texts == 8
    assert len(lines) == 1 and lines[0].startswith("encoders ready on cpu in ")
    plain = Encoder(backend="torch", device="cpu", use_cache=False)
    assert _warm((plain, plain), lines.append) is None and not plain.stream_stats.batches
