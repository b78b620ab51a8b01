"""The reader network and its directory: an encoder with a span head and a passage-selection head.

DPR's reader: the encoder reads ``question [SEP] title ⏎ passage``; a linear
layer over every token gives start and end logits, and one over the first
token gives a selection logit that ranks the passages of one question
against each other (trained with a softmax over a positive and hard
negatives), so the reader need not be told which passage holds the answer.

A reader directory holds the encoder and tokenizer as Hugging Face saves them
(safetensors only), the two heads in ``reader-heads.safetensors``, and
``hiera-reader.json`` (format, window length and stride, the encoder's
hidden and vocabulary sizes, how it was trained). Loading checks that the
three agree, so a directory whose tokenizer or encoder was swapped is refused
with a message rather than read with mismatched token ids.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hiera.errors import HieraError
from hiera.io import loads_json
from hiera.schema import READER_META, SchemaError, validate

META_FILE = "hiera-reader.json"
HEADS_FILE = "reader-heads.safetensors"
FORMAT = "hiera-reader/1"


def _torch_module():  # noqa: ANN202 - torch is imported lazily, like every model in hiera
    import torch
    from torch import nn

    class ReaderModel(nn.Module):
        """Encoder + span head (2 logits per token) + selection head (1 logit per window)."""

        def __init__(self, encoder: Any) -> None:
            super().__init__()
            self.encoder = encoder
            hidden = int(encoder.config.hidden_size)
            self.qa = nn.Linear(hidden, 2)
            self.select = nn.Linear(hidden, 1)

        def forward(
            self,
            input_ids: torch.Tensor,
            attention_mask: torch.Tensor,
            token_type_ids: torch.Tensor | None = None,
            context_mask: torch.Tensor | None = None,
            start_positions: torch.Tensor | None = None,
            end_positions: torch.Tensor | None = None,
        ) -> dict[str, torch.Tensor]:
            """Windows ``[W, L]`` (inference) or question groups ``[B, P, L]`` whose window 0 holds the answer.

            Training loss = span cross-entropy on each group's first window
            (logits outside the passage text masked) + selection
            cross-entropy over the group's windows (target: the first).
            """
            grouped = input_ids.dim() == 3
            shape = input_ids.shape
            flat = (lambda t: None if t is None else t.reshape(-1, shape[-1])) if grouped else (lambda t: t)
            kwargs = {"input_ids": flat(input_ids), "attention_mask": flat(attention_mask)}
            if token_type_ids is not None:
                kwargs["token_type_ids"] = flat(token_type_ids)
            hidden = self.encoder(**kwargs).last_hidden_state
            start, end = self.qa(hidden).unbind(-1)
            select = self.select(hidden[:, 0]).squeeze(-1)
            out = {"start_logits": start, "end_logits": end, "select_logits": select}
            if grouped and start_positions is not None:
                b, p = shape[0], shape[1]
                start = start.reshape(b, p, -1)[:, 0]
                end = end.reshape(b, p, -1)[:, 0]
                if context_mask is not None:
                    ctx = context_mask.reshape(b, p, -1)[:, 0].bool()
                    start = start.masked_fill(~ctx, -1e4)
                    end = end.masked_fill(~ctx, -1e4)
                ce = nn.functional.cross_entropy
                span = (ce(start, start_positions.reshape(-1)) + ce(end, end_positions.reshape(-1))) / 2
                sel = ce(select.reshape(b, p), torch.zeros(b, dtype=torch.long, device=select.device))
                out["loss"] = span + sel
                out["span_loss"], out["select_loss"] = span.detach(), sel.detach()
            return out

    return ReaderModel


def new_reader_model(base: Path) -> Any:
    """A reader with ``base``'s encoder and fresh heads (training starts here)."""
    from transformers import AutoModel

    from hiera.models import LOCAL_ONLY

    return _torch_module()(AutoModel.from_pretrained(str(base), **LOCAL_ONLY))


def interpolate_weights(model: Any, start: Path, weight: float) -> None:
    """Pull ``model`` back toward the reader at ``start``: every weight becomes ``start + weight · (model − start)``.

    A reader continued on questions phrased another way forgets part of what
    it read well before. Averaging its weights with those it started from (a
    weight-space ensemble, as WiSE-FT does for fine-tuned models) keeps much of
    the new gain at a fraction of the loss, at no cost when reading: the result
    is one model of the same size. Both must be the same network; they are,
    when ``model`` was trained from ``start`` (``hiera train-reader --init``).
    """
    import torch

    if not 0 < weight <= 1:
        raise HieraError(f"the interpolation weight must be in (0, 1], got {weight}")
    ref, _, _ = load_reader_model(Path(start))
    theirs = ref.state_dict()
    ours = model.state_dict()
    if theirs.keys() != ours.keys() or any(theirs[k].shape != v.shape for k, v in ours.items()):
        raise HieraError(f"{start}: not the network this reader was trained from (its weights differ in names or shapes)")
    with torch.no_grad():
        for name, value in ours.items():
            if value.is_floating_point():  # integer buffers (position ids) are the same in both
                value.mul_(weight).add_(theirs[name].to(value.device, value.dtype), alpha=1 - weight)


def save_reader(model: Any, tokenizer: Any, out: Path, meta: dict[str, Any]) -> None:
    """Encoder, tokenizer, heads and metadata into ``out`` (a fresh directory the caller publishes)."""
    from safetensors.torch import save_file

    from hiera.io import write_json_atomic

    out.mkdir(parents=True, exist_ok=True)
    model.encoder.save_pretrained(str(out), safe_serialization=True)
    tokenizer.save_pretrained(str(out))
    heads = {f"qa.{k}": v.contiguous() for k, v in model.qa.state_dict().items()}
    heads.update({f"select.{k}": v.contiguous() for k, v in model.select.state_dict().items()})
    save_file(heads, str(out / HEADS_FILE))
    cfg = model.encoder.config
    write_json_atomic(
        out / META_FILE,
        {
            "format": FORMAT,
            "hidden_size": int(cfg.hidden_size),
            "vocab_size": int(cfg.vocab_size),
            "tokenizer_size": len(tokenizer),
            **meta,
        },
    )


def read_meta(path: Path) -> dict[str, Any]:
    """``hiera-reader.json`` of a reader directory, or a one-line error saying what the directory is not."""
    path = Path(path)
    if not path.is_dir():
        raise HieraError(f"{path}: no such reader directory (train one with `hiera train-reader`)")
    f = path / META_FILE
    if not f.is_file():
        raise HieraError(f"{path}: not a reader directory (no {META_FILE}; train one with `hiera train-reader`)")
    try:
        meta = loads_json(f.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise HieraError(f"{f}: unreadable reader metadata ({e})") from None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise HieraError(f"{f}: not a {FORMAT} reader (format {meta.get('format') if isinstance(meta, dict) else None!r})")
    try:
        validate(meta, READER_META)
    except SchemaError as e:
        raise HieraError(f"{f}: {e}") from None
    if not 0 <= meta["stride"] < meta["max_length"]:
        raise HieraError(f"{f}: stride must be smaller than max_length")
    return meta


def load_reader_model(path: Path) -> tuple[Any, Any, dict[str, Any]]:
    """(model in eval mode, tokenizer, metadata); refuses a directory whose parts disagree."""
    from safetensors import SafetensorError
    from safetensors.torch import load_file
    from transformers import AutoModel, AutoTokenizer

    from hiera.models import LOCAL_ONLY, check_weights, quiet_transformers

    path = Path(path)
    meta = read_meta(path)
    check_weights(path)
    if not (path / HEADS_FILE).is_file():
        raise HieraError(f"{path}: the reader's heads ({HEADS_FILE}) are missing")
    with quiet_transformers():
        try:
            tokenizer = AutoTokenizer.from_pretrained(str(path), use_fast=True, **LOCAL_ONLY)
            encoder = AutoModel.from_pretrained(str(path), **LOCAL_ONLY)
        except (OSError, ValueError, SafetensorError) as e:  # missing, unreadable, or damaged (truncated) files
            raise HieraError(f"{path}: cannot load the reader's encoder or tokenizer "
                             f"({' '.join(str(e).split())})") from None
    cfg = encoder.config
    if len(tokenizer) != meta["tokenizer_size"]:
        raise HieraError(
            f"{path}: the tokenizer has {len(tokenizer)} tokens but the reader was trained with "
            f"{meta['tokenizer_size']}; the directory mixes models"
        )
    if int(cfg.vocab_size) != meta["vocab_size"] or int(cfg.hidden_size) != meta["hidden_size"]:
        raise HieraError(
            f"{path}: the encoder (vocabulary {cfg.vocab_size}, hidden {cfg.hidden_size}) does not match the reader's "
            f"metadata (vocabulary {meta['vocab_size']}, hidden {meta['hidden_size']})"
        )
    if len(tokenizer) > int(cfg.vocab_size):
        raise HieraError(f"{path}: the tokenizer has more tokens ({len(tokenizer)}) than the encoder's vocabulary")
    model = _torch_module()(encoder)
    try:
        heads = load_file(str(path / HEADS_FILE))
    except (OSError, SafetensorError) as e:
        raise HieraError(f"{path}: cannot read the reader's heads ({HEADS_FILE}: {' '.join(str(e).split())})") from None
    try:
        model.qa.load_state_dict({k[3:]: v for k, v in heads.items() if k.startswith("qa.")})
        model.select.load_state_dict({k[7:]: v for k, v in heads.items() if k.startswith("select.")})
    except RuntimeError as e:
        raise HieraError(f"{path}: the reader's heads do not fit its encoder ({str(e).splitlines()[0]})") from None
    model.eval()
    return model, tokenizer, meta
