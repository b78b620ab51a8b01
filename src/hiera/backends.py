"""Running a sentence-transformers encoder with ONNX Runtime or OpenVINO instead of torch.

Encoding is the slow part of hiera on a CPU, and an exported graph runs the
same model faster: fused attention and layer-norm kernels, and (``onnx-int8``)
int8 matrix products. Backends:

============  ===============================================================
``torch``     sentence-transformers itself (the reference)
``onnx``      ONNX Runtime, the graph fused by its transformer optimizer
``onnx-int8`` documents through the same graph with its weights quantized
              to int8 per channel (dynamic quantization: activations are
              quantized on the fly); queries through the float graph
``openvino``  OpenVINO on the plain exported graph
``auto``      the default: ``onnx-int8`` if installed, else ``onnx``, else
              ``openvino``, else ``torch`` (:data:`AUTO_ORDER`)
============  ===============================================================

Why hiera exports the model itself rather than use sentence-transformers'
``backend="onnx"`` / ``"openvino"``: those go through optimum, whose ONNX
package pins ``transformers < 4.58`` and whose OpenVINO package pulls a CUDA
build of torch; hiera pins a CPU torch 2.13 and transformers 5. Tokenization,
prompts and truncation stay sentence-transformers' own (``preprocess``), and
the exported graph is the whole module pipeline (transformer, pooling, any
dense layer) up to the sentence embedding, so a model the exporter can trace
gives the same vectors as torch (cosine 1.0 for ``onnx`` and ``openvino``;
about 0.99 for ``onnx-int8``'s document vectors, whose effect on retrieval
``bench/encode_speed.py`` measures).

Why ``onnx-int8`` encodes queries in float: int8 pays where a build spends its
time, on thousands of passages, and a query is one short text (4-5 ms in float
on this 2-core machine). Quantization error on both sides of the inner product
adds up; on one side only, dense top-1 on the pooled benchmark went from
0.9 points below torch's to 0.4 (``bench/encode_speed.py``), within the 0.5 a
default may lose. The document vectors, and so the embedding cache, are the
same either way. An int8 vector also depends a little on the batch it was
encoded in (activations are quantized with one range per graph call); the
embedding cache keeps the first one, so a rebuild or ``hiera add`` reuses it.

Why a search process need not load sentence-transformers at all: once the
graphs exist, a query needs only a tokenizer and ONNX Runtime. Importing
sentence-transformers (and with it torch, transformers and scikit-learn) is
about 7 of the 10 seconds a cold ``hiera search`` took on this machine.
:class:`FastTokenizer` reads the model's ``tokenizer.json`` with the
``tokenizers`` library and pads and truncates as sentence-transformers does;
it is used only for the plain pipeline (Transformer, one Pooling mode,
Normalize; no prompts, no lower-casing, no extra processing settings), where
``tests/test_backends.py`` checks it gives the same token tensors; any other
model loads sentence-transformers as before.

Exports are made once per model (fingerprint) and kept beside the embedding
cache, each file written to a temporary name and renamed, so two processes
exporting at once, or a killed export, never leave a half-written graph.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Sequence
from itertools import chain
from pathlib import Path
from typing import Any

import numpy as np

from hiera.errors import HieraError
from hiera.io import write_atomic

BACKENDS: dict[str, str] = {
    "auto": "the fastest installed backend within 0.5 points of torch's retrieval: onnx-int8, else onnx, else "
            "openvino, else torch",
    "torch": "sentence-transformers on torch (the reference)",
    "onnx": "ONNX Runtime, fused graph (same vectors as torch)",
    "onnx-int8": "ONNX Runtime, int8 weights for documents (cosine ≈ 0.99 to torch's vectors), float for queries",
    "openvino": "OpenVINO (same vectors as torch)",
}
# The graphs each backend runs, made in this order from the one before.
_FILES = {"openvino": "model.onnx", "onnx": "model-fused.onnx", "onnx-int8": "model-fused-int8.onnx"}
_PACKAGES = {"onnx": ("onnxruntime",), "onnx-int8": ("onnxruntime", "onnx"), "openvino": ("openvino",)}
# The most texts one graph call takes, whatever the encoder's batch size. On this 2-core machine (1 MiB L2
# per core) ONNX Runtime encoded MiniLM passages fastest in batches of 8: int8 88-99 passages/s against 73-93
# in batches of 16 and 53-79 in batches of 32; the float graph 60 against 53-58 and 44-50. Larger batches'
# activations (batch × tokens × 1536 floats in the feed-forward layers) leave the cache.
GRAPH_BATCH = 8
# Models whose graphs ONNX Runtime's transformer optimizer knows how to fuse.
_FUSABLE = {"bert", "roberta", "xlm-roberta", "mpnet", "electra", "deberta-v2"}


# ``auto``'s order: the fastest installed backend whose loss on the pooled benchmark stays within 0.5 points of
# torch's passage top-1 and top-20 (bench/encode_speed.py, 2-core AVX2 machine, one run, 5,696 questions).
# onnx-int8 (int8 documents, float queries): 1.71× torch's passages/s; dense −0.40 / +0.10, dhr −0.37 / 0.00
# (with int8 queries too dense lost 0.89 top-1). onnx: 1.09×, torch's vectors; a single query in 3.7 ms
# against torch's 11-21. openvino: 1.0-1.2× with torch's vectors, but slower queries than onnx.
AUTO_ORDER = ("onnx-int8", "onnx", "openvino", "torch")


def _missing(backend: str) -> list[str]:
    """The runtime packages ``backend`` needs that are not installed."""
    import importlib.util

    return [p for p in _PACKAGES.get(backend, ()) if importlib.util.find_spec(p) is None]


def installed(backend: str) -> bool:
    return not _missing(backend)


def check_backend(name: str) -> str:
    """The backend's canonical name (``auto`` resolved on this machine), or a one-line error listing the known ones."""
    key = str(name).strip().lower()
    if key not in BACKENDS:
        raise HieraError(f"unknown encoder backend {name!r}; choose one of: {', '.join(BACKENDS)}")
    if key == "auto":
        return next(b for b in AUTO_ORDER if installed(b))
    return key


def require(backend: str) -> None:
    """Refuse a backend whose runtime is not installed, naming the extra that brings it."""
    missing = _missing(backend)
    if missing:
        raise HieraError(
            f"encoder backend {backend!r} needs {', '.join(missing)} (pip install 'hiera[fast]'), "
            f"or use --backend torch"
        )


def _tensors(features: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in features.items() if hasattr(v, "shape")}


def _check_exportable(st: Any) -> None:
    """Refuse the models whose embedding depends on more than the token tensors (the graph's only inputs)."""
    for module in st:
        if getattr(module, "include_prompt", True) is False and any(st.prompts.values()):
            raise HieraError(
                "this model's pooling leaves its prompt tokens out (include_prompt=False), which an exported "
                "graph cannot do; use --backend torch"
            )


def _atomic(target: Path, write: Callable[[Path], None]) -> Path:
    """Make ``target`` with ``write(tmp)`` unless it exists; a rename publishes it whole."""
    if target.exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    return write_atomic(target, write)


def _export(st: Any, out: Path) -> None:
    """Trace the whole module pipeline into one ONNX graph: token tensors in, sentence embedding out."""
    import torch

    sample = _tensors(st.preprocess(["an example sentence", "and a second, somewhat longer example sentence"]))
    names = list(sample)

    class Graph(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.st = st

        def forward(self, *tensors: torch.Tensor) -> torch.Tensor:
            return self.st(dict(zip(names, tensors, strict=True)))["sentence_embedding"]

    # Eager attention exports as plain MatMul/Softmax, the pattern ONNX Runtime's optimizer fuses
    # (the default scaled-dot-product kernel does not export as one).
    model = getattr(st[0], "auto_model", None)
    set_impl = getattr(model, "set_attn_implementation", None)
    before = getattr(getattr(model, "config", None), "_attn_implementation", None)
    if set_impl is not None and before not in (None, "eager"):
        set_impl("eager")
    try:
        import warnings

        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the tracer's notes on shape-dependent Python branches
            torch.onnx.export(
                Graph().eval(), tuple(sample[n] for n in names), str(out), input_names=names,
                output_names=["embedding"], opset_version=17, dynamo=False,
                dynamic_axes={**{n: {0: "batch", 1: "tokens"} for n in names}, "embedding": {0: "batch"}},
            )
    except Exception as e:  # noqa: BLE001 - any tracer failure means: this model cannot leave torch
        raise HieraError(f"cannot export this model to ONNX ({type(e).__name__}: {e}); use --backend torch") from None
    finally:
        if set_impl is not None and before not in (None, "eager"):
            set_impl(before)


def _fuse(st: Any, src: Path, out: Path) -> None:
    """ONNX Runtime's transformer optimizer: attention, GELU and layer norms as single kernels."""
    config = getattr(getattr(st[0], "auto_model", None), "config", None)
    if getattr(config, "model_type", None) not in _FUSABLE:
        out.write_bytes(src.read_bytes())  # other architectures run unfused
        return
    import logging

    from onnxruntime.transformers.optimizer import optimize_model

    logging.getLogger("onnxruntime.transformers").setLevel(logging.ERROR)
    fused = optimize_model(
        str(src), model_type="bert", num_heads=int(config.num_attention_heads), hidden_size=int(config.hidden_size),
        opt_level=1,
    )
    fused.save_model_to_file(str(out))


def _quantize(src: Path, out: Path) -> None:
    """int8 weights per output channel, activations quantized per batch: the variant that held quality best.

    Plain per-tensor int8 moved MiniLM's vectors to cosine 0.95 of torch's;
    per channel, and only the matrix products, 0.99.
    """
    import logging

    from onnxruntime.quantization import QuantType, quantize_dynamic

    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.ERROR)  # its advice to pre-process, on the root logger, on every call
    try:
        quantize_dynamic(
            str(src), str(out), weight_type=QuantType.QInt8, per_channel=True,
            op_types_to_quantize=["MatMul", "Attention"], extra_options={"DefaultTensorType": 1},
        )
    finally:
        root.setLevel(level)


def graph_path(st: Any, backend: str, root: Path) -> Path:
    """The graph ``backend`` runs for this model, exported (and fused, quantized) on first use."""
    plain = _atomic(root / _FILES["openvino"], lambda tmp: _export(st, tmp))
    if backend == "openvino":
        return plain
    fused = _atomic(root / _FILES["onnx"], lambda tmp: _fuse(st, plain, tmp))
    if backend == "onnx":
        return fused
    return _atomic(root / _FILES["onnx-int8"], lambda tmp: _quantize(fused, tmp))


def _threads() -> int:
    """As many threads as torch uses (``OMP_NUM_THREADS`` or the cores), so every backend gets the same share.

    Asks torch only when it is loaded already: importing it to count cores costs a cold search seconds.
    0 (the runtimes' own default, the physical cores, as torch's) when neither says.
    """
    if "torch" in sys.modules:
        return max(1, int(sys.modules["torch"].get_num_threads()))
    env = os.environ.get("OMP_NUM_THREADS", "").strip()
    return int(env) if env.isdigit() and int(env) > 0 else 0


def session_options() -> Any:
    """ONNX Runtime's options for every graph hiera runs (``bench.encode_speed --kernels`` profiles with them)."""
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = _threads()
    so.inter_op_num_threads = 1
    so.log_severity_level = 3
    if os.environ.get("OMP_WAIT_POLICY", "").upper() == "PASSIVE":
        # idle threads sleep, as torch's and FAISS's do (hiera.models.passive_threads)
        so.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return so


def graphs_ready(backend: str, root: Path) -> bool:
    """Whether ``backend``'s graphs for documents and queries are exported already (nothing to trace)."""
    if backend not in _FILES:
        return False
    needed = [_FILES[backend]] + ([_FILES["onnx"]] if backend == "onnx-int8" else [])
    return all((Path(root) / name).is_file() for name in needed)


_PLAIN_MODULES = ("sentence_transformers.models.Transformer", "sentence_transformers.models.Pooling",
                  "sentence_transformers.models.Normalize")
_PLAIN_ST_CONFIG = {"__version__", "prompts", "default_prompt_name", "similarity_fn_name", "model_type"}


class FastTokenizer:
    """Token tensors for a plain sentence-transformers model, from its ``tokenizer.json`` alone (module docstring)."""

    def __init__(self, tokenizer: Any, max_seq_length: int, dim: int, pad_id: int = 0, zero_types: bool = False) -> None:
        self.tokenizer, self.max_seq_length, self.dim = tokenizer, max_seq_length, dim
        self.pad_id, self.zero_types = pad_id, zero_types

    @classmethod
    def load(cls, model_dir: Path) -> FastTokenizer | None:
        """The tokenizer when ``model_dir`` is a plain pipeline this class reproduces exactly, else None."""
        model_dir = Path(model_dir)
        try:
            modules = json.loads((model_dir / "modules.json").read_text())
            sbert = json.loads((model_dir / "sentence_bert_config.json").read_text())
            st_cfg_path = model_dir / "config_sentence_transformers.json"
            st_cfg = json.loads(st_cfg_path.read_text()) if st_cfg_path.exists() else {}
            types = tuple(m["type"] for m in modules)
            if types not in (_PLAIN_MODULES, _PLAIN_MODULES[:2]) or modules[0].get("path") not in ("", "."):
                return None
            pooling = json.loads((model_dir / modules[1]["path"] / "config.json").read_text())
        except (OSError, ValueError, KeyError, TypeError, IndexError):
            return None
        if set(sbert) - {"max_seq_length", "do_lower_case"} or sbert.get("do_lower_case"):
            return None
        if set(st_cfg) - _PLAIN_ST_CONFIG or any((st_cfg.get("prompts") or {}).values()) \
                or st_cfg.get("default_prompt_name"):
            return None
        modes = [k for k, v in pooling.items() if k.startswith("pooling_mode_") and v is True]
        max_len, dim = sbert.get("max_seq_length"), pooling.get("word_embedding_dimension")
        if len(modes) != 1 or not isinstance(max_len, int) or not isinstance(dim, int):
            return None
        try:
            from tokenizers import Tokenizer

            tok = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
        except Exception:  # not installed, or a file this version cannot read: sentence-transformers can
            return None
        pad = (tok.padding or {}).get("pad_token") or "[PAD]"
        pad_id = tok.token_to_id(pad)
        if pad_id is None:
            return None
        tok.enable_truncation(max_length=max_len)  # tokenizer.json's own settings (128 for MiniLM) are not the model's
        tok.no_padding()  # padded here, in numpy (__call__)
        return cls(tok, max_len, dim, pad_id, _zero_type_ids(tok))

    def __call__(self, texts: Sequence[str]) -> dict[str, np.ndarray]:
        """``input_ids``, ``attention_mask``, ``token_type_ids``: int64, padded on the right to the longest text.

        The tokenizer's own padding would hand every id back as a Python int
        three times (ids, mask, types); here only the ids cross into Python,
        once, and the rest is numpy: a third of the time a batch holds the GIL,
        which is what lets :class:`TokenizerPool` threads scale. Offsets are
        never computed (``encode_batch_fast``): nothing reads them. It is
        :meth:`packed`'s batch widened to int64 in numpy.
        """
        packed = self.packed(texts)
        input_ids = packed["ids"].astype(np.int64)
        mask = np.arange(input_ids.shape[1])[None, :] < packed["lengths"][:, None]
        types = packed["types"].astype(np.int64) if "types" in packed else np.zeros_like(input_ids)
        return {"input_ids": input_ids, "attention_mask": mask.astype(np.int64), "token_type_ids": types}

    def packed(self, texts: Sequence[str], multiple: int = 1) -> dict[str, np.ndarray]:
        """The same batch in the fewest bytes: ``ids`` int32 (padded with the pad id), ``lengths`` int32 and, for a
        model whose type ids are not all 0, ``types`` int8. :func:`hiera.encode.model_inputs` widens them on the
        device: a worker process hands back a sixth of :meth:`__call__`'s bytes, and the host copies that much in.

        ``multiple``: the padded width rounded up to a multiple of it (never past the longer of the longest text
        and the model's maximum): a GPU then sees a few shapes instead of one per batch, and each new shape costs
        its kernels' first loading. Padding is masked, so the vectors are the same.
        """
        enc = self.tokenizer.encode_batch_fast(list(texts))
        ids = [e.ids for e in enc]
        lengths = np.fromiter(map(len, ids), dtype=np.int32, count=len(ids))
        width = rounded_width(int(lengths.max()) if len(ids) else 0, multiple, self.max_seq_length)
        mask = np.arange(width)[None, :] < lengths[:, None]
        out = np.full((len(ids), width), self.pad_id, dtype=np.int32)
        out[mask] = np.fromiter(chain.from_iterable(ids), dtype=np.int32, count=int(lengths.sum()))
        packed = {"ids": out, "lengths": lengths}
        if not self.zero_types:
            types = np.zeros(out.shape, dtype=np.int8)
            types[mask] = np.fromiter(chain.from_iterable(e.type_ids for e in enc), dtype=np.int8,
                                      count=int(lengths.sum()))
            packed["types"] = types
        return packed

    def packing(self, multiple: int = 1) -> PackingTokenizer:
        """This tokenizer called as :meth:`packed` (what the streaming encoder's workers run)."""
        return PackingTokenizer(self, multiple)

    def copy(self) -> FastTokenizer:
        """An independent tokenizer: one object called from two threads at once raises "Already borrowed"."""
        from tokenizers import Tokenizer

        return FastTokenizer(Tokenizer.from_str(self.tokenizer.to_str()), self.max_seq_length, self.dim, self.pad_id,
                             self.zero_types)

    def __getstate__(self) -> dict[str, Any]:
        return {"json": self.tokenizer.to_str(), "max_seq_length": self.max_seq_length, "dim": self.dim,
                "pad_id": self.pad_id, "zero_types": self.zero_types}

    def __setstate__(self, state: dict[str, Any]) -> None:
        from tokenizers import Tokenizer

        self.__init__(Tokenizer.from_str(state["json"]), state["max_seq_length"], state["dim"], state["pad_id"],
                      state["zero_types"])


def rounded_width(width: int, multiple: int, most: int) -> int:
    """A batch's padded ``width`` rounded up to a multiple of ``multiple``, never past the larger of ``width`` and
    ``most`` (the model's maximum, or the widest row there is)."""
    if multiple <= 1 or not width:
        return width
    return min(-(-width // multiple) * multiple, max(width, most))


class PackingTokenizer:
    """A :class:`FastTokenizer` whose call returns :meth:`FastTokenizer.packed` (a worker's tokenizer, copyable)."""

    def __init__(self, fast: FastTokenizer, multiple: int = 1) -> None:
        self.fast, self.multiple = fast, multiple

    def __call__(self, texts: Sequence[str]) -> dict[str, np.ndarray]:
        return self.fast.packed(texts, self.multiple)

    def copy(self) -> PackingTokenizer:
        return PackingTokenizer(self.fast.copy(), self.multiple)


def _zero_type_ids(tok: Any) -> bool:
    """Whether the post-processor gives every token of a single text type id 0 (BERT's, RoBERTa's): no need to read them."""
    try:
        post = json.loads(tok.to_str()).get("post_processor")
    except ValueError:
        return False
    if post is None or post.get("type") in ("BertProcessing", "RobertaProcessing", "ByteLevel"):
        return True
    if post.get("type") == "TemplateProcessing":
        pieces = post.get("single") or []
        return all(int(next(iter(p.values())).get("type_id", 0)) == 0 for p in pieces)
    return False


class GraphEncoder:
    """One exported sentence-transformers model: texts in, L2-normalized float32 vectors out.

    Sessions open on first use, one per graph: a build never loads the query
    graph, a search process never loads the int8 document graph. With a
    :class:`FastTokenizer` and the graphs already exported, the
    sentence-transformers model (``model``, called for it) is never loaded.
    """

    def __init__(self, model: Callable[[], Any], backend: str, root: Path,
                 tokenizer: FastTokenizer | None = None) -> None:
        """``backend``: a checked, installed one (:class:`hiera.encode.Encoder` checks before loading the model)."""
        if backend not in _FILES:
            raise ValueError(f"GraphEncoder runs exported graphs ({', '.join(_FILES)}), not {backend!r}")
        self.backend = backend
        if tokenizer is not None and graphs_ready(backend, root):
            self.path = Path(root) / _FILES[backend]
            self._tokenize: Callable[[list[str], str], dict[str, np.ndarray]] = lambda texts, prompt: tokenizer(texts)
        else:
            st = model()
            _check_exportable(st)
            self.path = graph_path(st, backend, Path(root))  # documents
            self._tokenize = lambda texts, prompt: {
                k: v.numpy() for k, v in _tensors(st.preprocess(texts, prompt=prompt or None)).items()
            }
        # queries: the float graph the int8 one was quantized from (made on the way to it)
        self.query_path = self.path.with_name(_FILES["onnx"]) if backend == "onnx-int8" else self.path
        self._runs: dict[Path, Callable[[dict[str, np.ndarray]], np.ndarray]] = {}

    def _runner(self, path: Path) -> Callable[[dict[str, np.ndarray]], np.ndarray]:
        if path not in self._runs:
            self._runs[path] = self._openvino(path) if self.backend == "openvino" else self._onnxruntime(path)
        return self._runs[path]

    def _onnxruntime(self, path: Path) -> Callable[[dict[str, np.ndarray]], np.ndarray]:
        import onnxruntime as ort

        session = ort.InferenceSession(str(path), session_options(), providers=["CPUExecutionProvider"])
        inputs = [i.name for i in session.get_inputs()]
        return lambda feed: session.run(None, {n: feed[n] for n in inputs})[0]

    def _openvino(self, path: Path) -> Callable[[dict[str, np.ndarray]], np.ndarray]:
        import openvino as ov

        compiled = ov.Core().compile_model(str(path), "CPU", {"INFERENCE_NUM_THREADS": _threads()})
        inputs = [p.get_any_name() for p in compiled.inputs]
        return lambda feed: compiled({n: feed[n] for n in inputs})[0]

    def encode(
        self, texts: Sequence[str], prompt: str, batch_size: int, progress: bool = False, *, query: bool = False
    ) -> np.ndarray:
        """Length-sorted batches of at most :data:`GRAPH_BATCH` (little padding), returned in the input order."""
        from tqdm import tqdm

        run = self._runner(self.query_path if query else self.path)
        batch_size = max(1, min(batch_size, GRAPH_BATCH))
        order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
        out: np.ndarray | None = None
        for start in tqdm(range(0, len(order), batch_size), disable=not progress, leave=False, desc="encode"):
            idx = order[start : start + batch_size]
            vecs = np.asarray(run(self._tokenize([texts[i] for i in idx], prompt)), dtype=np.float32)
            if out is None:
                out = np.zeros((len(texts), vecs.shape[1]), dtype=np.float32)
            out[idx] = vecs
        assert out is not None
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return out / np.maximum(norms, 1e-12)


# -- tokenizing in parallel --------------------------------------------------------------------------------------
# One worker is one core: each tokenizes a whole batch on its own (TOKENIZERS_PARALLELISM off in a worker process),
# which on this 2-core machine gave 2.0x one worker where the tokenizer's own batch parallelism (rayon) gave 1.6x.
POOL_KINDS = ("thread", "process")
_WORKER: FastTokenizer | PackingTokenizer | None = None  # a worker process's tokenizer


def _process_init(tokenizer: FastTokenizer | PackingTokenizer) -> None:
    global _WORKER
    os.environ["TOKENIZERS_PARALLELISM"] = "false"  # the workers are the parallelism
    _WORKER = tokenizer


def _process_call(texts: list[str]) -> dict[str, np.ndarray]:
    assert _WORKER is not None
    return _WORKER(texts)


class TokenizerPool:
    """Token tensors of batches from ``workers`` tokenizers at once, each worker with its own copy.

    ``submit(texts)`` returns a future; callers keep the futures in order, so
    batches come back in the order they were submitted whichever worker
    finishes first. ``kind``: ``thread`` (no start-up cost; the tokenizer
    releases the GIL while it works, the numpy padding holds it for a few
    microseconds a text) or ``process`` (nothing shared: the host's other
    work — launching a GPU's kernels — never waits on the GIL; worker
    processes are started with ``fork`` where there is one, as PyTorch's data
    loaders are, and touch nothing but the tokenizer).
    """

    def __init__(self, tokenizer: FastTokenizer | PackingTokenizer, workers: int, kind: str = "thread") -> None:
        if kind not in POOL_KINDS:
            raise ValueError(f"unknown tokenizer pool kind {kind!r}; choose one of: {', '.join(POOL_KINDS)}")
        self.workers, self.kind = max(1, int(workers)), kind
        if kind == "process":
            import multiprocessing as mp
            from concurrent.futures import ProcessPoolExecutor

            ctx = mp.get_context("fork" if "fork" in mp.get_all_start_methods() else "spawn")
            self._pool: Any = ProcessPoolExecutor(self.workers, mp_context=ctx, initializer=_process_init,
                                                  initargs=(tokenizer,))
            self._call: Callable[[list[str]], dict[str, np.ndarray]] = _process_call
        else:
            import threading
            from concurrent.futures import ThreadPoolExecutor

            local = threading.local()

            def call(texts: list[str]) -> dict[str, np.ndarray]:
                tok = getattr(local, "tok", None)
                if tok is None:
                    tok = local.tok = tokenizer.copy()
                return tok(texts)

            self._pool = ThreadPoolExecutor(self.workers, thread_name_prefix="hiera-tokenize")
            self._call = call

    def submit(self, texts: Sequence[str]) -> Any:
        return self._pool.submit(self._call, list(texts))

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)

    def __enter__(self) -> TokenizerPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
