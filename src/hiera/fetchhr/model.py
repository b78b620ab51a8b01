"""A FetchHR model directory: the heads, the query encoder they read, the passage encoder they target.

Layout of a directory ``hiera train-fetchhr`` writes::

    fetchhr.json        format, head shapes, retrieving layers, query encoder (name, path, fingerprint),
                        passage encoder fingerprint (the passage vectors the heads were trained against)
    rnets.safetensors   the RNets' weights (safetensors only: hiera never unpickles weights)
    hiera-train.json    how it was trained (arguments, examples, wall time, peak RSS)

The query encoder runs once per batch of questions with every hidden state
returned; each layer's head then turns its layer's states into that layer's
query vector, so all layers share one encoder forward pass.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from hiera.encode import Encoder
from hiera.errors import BadInputError, HieraError, ManifestMismatchError
from hiera.io import loads_json, write_json_atomic

FORMAT = "hiera-fetchhr/1"
CONFIG_FILE = "fetchhr.json"
WEIGHTS_FILE = "rnets.safetensors"


@dataclass(frozen=True)
class HeadConfig:
    """Shapes of the heads and the encoders they belong to (``fetchhr.json``)."""

    layers: list[int]
    dim: int
    heads: int
    ffn: int
    depth: int = 2
    dropout: float = 0.1
    query_encoder: dict[str, Any] = field(default_factory=dict)  # name, path, fingerprint, num_layers
    passage_fingerprint: str = ""
    format: str = FORMAT

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def read(cls, root: Path) -> HeadConfig:
        path = root / CONFIG_FILE
        if not path.is_file():
            raise HieraError(f"{root} is not a FetchHR model (no {CONFIG_FILE}); train one with `hiera train-fetchhr`")
        try:
            data = loads_json(path.read_bytes())
            cfg = cls(**data)
        except (ValueError, TypeError) as e:
            raise HieraError(f"{path} is not a valid FetchHR config: {e}") from None
        if cfg.format != FORMAT:
            raise HieraError(f"{path}: format {cfg.format!r}, this hiera reads {FORMAT!r}")
        return cfg


class LayerStates:
    """Every hidden state of a sentence-transformers query encoder, from one forward pass.

    Queries get the encoder's query prompt and its max sequence length, as
    ``Encoder.encode_query`` would give them.
    """

    def __init__(self, encoder: Encoder) -> None:
        self.encoder = encoder
        st = encoder.model
        self.backbone = st[0].auto_model
        self.num_layers = int(self.backbone.config.num_hidden_layers)
        self.dim = int(self.backbone.config.hidden_size)

    def __call__(self, texts: Sequence[str], layers: Sequence[int]) -> tuple[dict[int, Any], Any]:
        """``({layer: (n, tokens, dim) tensor}, attention mask (n, tokens))``, no gradients."""
        import torch

        st = self.encoder.model
        prompt = self.encoder.query_prompt
        with self.encoder._lock, torch.inference_mode():
            feats = st.preprocess([prompt + t for t in texts])
            inputs = {k: v for k, v in feats.items() if k in ("input_ids", "attention_mask", "token_type_ids")}
            device = getattr(self.encoder, "device", "cpu")  # a GPU encoder (float16): states come back float32
            out = self.backbone(**{k: v.to(device) for k, v in inputs.items()}, output_hidden_states=True)
        hs = out.hidden_states  # embeddings, then one per transformer layer
        return {n: hs[n].float().cpu() for n in layers}, inputs["attention_mask"]


def mean_pool(states: Any, mask: Any) -> Any:
    """Masked mean over tokens, L2-normalized (all-MiniLM-L6-v2's own pooling)."""
    import torch

    m = mask.to(states.dtype).unsqueeze(-1)
    return torch.nn.functional.normalize((states * m).sum(1) / m.sum(1).clamp(min=1.0), dim=-1)


class FetchHRModel:
    """Heads over a query encoder → one unit query vector per layer, in the passage vectors' space.

    ``heads=None`` is the model-free mode: each layer's query vector is its
    mean-pooled hidden states (no training; the last layer is then exactly
    the ``dense`` query vector).
    """

    def __init__(self, config: HeadConfig, encoder: Encoder, heads: Any = None) -> None:
        self.config = config
        self.encoder = encoder
        self.states = LayerStates(encoder)
        self.heads = heads
        self._stacked = None
        if heads is not None:
            from hiera.fetchhr.rnet import StackedHeads

            heads.eval()
            self._stacked = StackedHeads(heads)  # inference runs the heads stacked; ``heads`` stays the module

    @property
    def layers(self) -> list[int]:
        return list(self.config.layers)

    @property
    def trained(self) -> bool:
        return self.heads is not None

    @classmethod
    def mean_pooled(cls, encoder: Encoder) -> FetchHRModel:
        """The model-free mode over ``encoder`` (every layer retrieves with its mean-pooled states)."""
        n = LayerStates(encoder)
        cfg = HeadConfig(
            layers=list(range(1, n.num_layers + 1)), dim=n.dim, heads=0, ffn=0, depth=0, dropout=0.0,
            query_encoder=encoder_record(encoder, n.num_layers), passage_fingerprint=encoder.fingerprint,
        )
        return cls(cfg, encoder, None)

    @classmethod
    def load(cls, path: str | Path, passage_encoder: Encoder | None = None) -> FetchHRModel:
        """Read a model directory; reuse ``passage_encoder`` when it is the query encoder the heads were trained on."""
        from safetensors.torch import load_file

        from hiera.fetchhr.rnet import RNetSet

        root = Path(path).expanduser()
        if not root.is_dir():
            raise BadInputError(f"FetchHR model {str(path)!r} is not a directory")
        cfg = HeadConfig.read(root)
        weights = root / WEIGHTS_FILE
        if not weights.is_file():
            raise HieraError(f"{root}: no {WEIGHTS_FILE} (hiera loads safetensors only)")
        qe = cfg.query_encoder
        if passage_encoder is not None and passage_encoder.fingerprint == qe.get("fingerprint"):
            encoder = passage_encoder
        else:
            source = qe.get("path") if qe.get("path") and Path(qe["path"]).is_dir() else qe.get("name")
            encoder = Encoder(source, use_cache=False, device="cpu")  # FetchHR's per-layer search runs on the CPU
            if encoder.fingerprint != qe.get("fingerprint"):
                raise ManifestMismatchError(
                    f"{root}: its query encoder {qe.get('name')} changed since the heads were trained "
                    f"(fingerprint {encoder.fingerprint[:12]} ≠ {str(qe.get('fingerprint'))[:12]})"
                )
        heads = RNetSet(cfg.layers, cfg.dim, cfg.heads, cfg.ffn, cfg.depth, cfg.dropout)
        try:
            heads.load_state_dict(load_file(str(weights)))
        except (RuntimeError, OSError) as e:
            raise HieraError(f"{weights}: the weights do not fit {CONFIG_FILE} ({str(e).splitlines()[0]})") from None
        return cls(cfg, encoder, heads)

    def save(self, root: Path) -> None:
        """Write ``fetchhr.json`` and ``rnets.safetensors`` into ``root`` (the trainer publishes the directory)."""
        from safetensors.torch import save_file

        if self.heads is None:
            raise HieraError("the model-free FetchHR mode has no heads to save")
        root.mkdir(parents=True, exist_ok=True)
        state = {k: v.detach().contiguous().cpu() for k, v in self.heads.state_dict().items()}
        save_file(state, str(root / WEIGHTS_FILE))
        write_json_atomic(root / CONFIG_FILE, self.config.to_dict())

    def check_passages(self, fingerprint: str, where: str) -> None:
        """Refuse passage vectors made by another encoder than the one the heads were trained against."""
        if fingerprint != self.config.passage_fingerprint:
            raise ManifestMismatchError(
                f"the FetchHR heads were trained against passage encoder {self.config.passage_fingerprint[:12]} but "
                f"{where}'s passages were encoded by {fingerprint[:12]}; train heads on this collection "
                f"(hiera train-fetchhr) or search one built with that encoder"
            )

    def query_vectors(self, texts: Sequence[str], layers: Sequence[int], own_last: bool = False) -> dict[int, np.ndarray]:
        """``{layer: (n, dim) float32 unit vectors}`` from one forward pass of the encoder.

        ``own_last``: the final layer's vector is the encoder's own query
        vector (its pooling and normalization over the final hidden states,
        as ``Encoder.encode_query`` computes it), not its head's.
        """
        return self.vectors(texts, layers, own_last).layers

    def vectors(self, texts: Sequence[str], layers: Sequence[int], own_last: bool = False) -> QueryVectors:
        """Every layer's query vector and the encoder's own (what ranks the fetched union), from one forward pass.

        The heads run stacked (:class:`~hiera.fetchhr.rnet.StackedHeads`):
        one batched product per weight for all layers at once.
        """
        import torch

        final = self.states.num_layers
        t = time.perf_counter()
        states, mask = self.states(texts, sorted({*layers, final}))
        with torch.inference_mode():
            feats: dict[str, Any] = {"token_embeddings": states[final], "attention_mask": mask}
            for module in list(self.encoder.model)[1:]:  # the sentence-transformers pooling (+ normalize)
                feats = module(feats)
            own = feats["sentence_embedding"]
            encode_s = time.perf_counter() - t
            t = time.perf_counter()
            if self._stacked is None:
                out = {n: mean_pool(states[n], mask) for n in layers}
            else:
                headed = [n for n in layers if not (own_last and n == final)]
                out = self._stacked({n: states[n] for n in headed}, mask) if headed else {}
                if own_last and final in layers:
                    out = {**out, final: own}
            heads_s = time.perf_counter() - t
        return QueryVectors({n: out[n].float().numpy() for n in layers}, own.float().numpy(),
                            encode_s * 1000, heads_s * 1000)


@dataclass
class QueryVectors:
    """One batch of questions: a unit query vector per layer, the encoder's own, and what each part cost (ms, whole batch)."""

    layers: dict[int, np.ndarray]  # layer → (n, dim)
    own: np.ndarray  # (n, dim): the encoder's own query vector, dense's
    encode_ms: float  # the encoder's forward pass (and its pooling)
    heads_ms: float  # the heads (0 without heads: mean pooling is part of the pass)


def encoder_record(encoder: Encoder, num_layers: int) -> dict[str, Any]:
    """What ``fetchhr.json`` keeps about the query encoder."""
    return {"name": encoder.name, "path": str(encoder.path), "fingerprint": encoder.fingerprint, "num_layers": num_layers}

