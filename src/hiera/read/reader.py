"""Read passages into ranked answers with a trained reader (``hiera train-reader``).

Reading is split in two so an evaluation over several read-k values encodes
each passage once: :meth:`Reader.logits` runs the model over every window of
the passages, :meth:`Reader.decode` turns the logits of the first ``upto``
passages into merged, ranked answers.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from hiera.errors import BadInputError
from hiera.models import resolve_device
from hiera.read.decode import Answer, merge, window_candidates
from hiera.read.features import Windows, make_windows
from hiera.read.model import load_reader_model
from hiera.spec import MethodSpec, reader_spec


@dataclass
class WindowLogits:
    """The model's output for every window of one question's passages."""

    windows: Windows
    texts: list[str]
    start: np.ndarray  # [W, L]
    end: np.ndarray  # [W, L]
    select: np.ndarray  # [W]
    ms: float

    def upto(self, n: int) -> np.ndarray:
        """Windows of the first ``n`` passages."""
        return np.flatnonzero(self.windows.passage < n)

    def subset(self, passages: Sequence[int]) -> WindowLogits:
        """The windows of ``passages`` (indices into this reading), renumbered in that order.

        Lets a benchmark read the union of several retrievers' passages once
        and decode each retriever's list from it: a passage's logits do not
        depend on the other passages read with it.
        """
        rows: list[int] = []
        owner: list[int] = []
        for new, old in enumerate(passages):
            w = np.flatnonzero(self.windows.passage == old)
            rows.extend(int(x) for x in w)
            owner.extend([new] * len(w))
        r = np.asarray(rows, dtype=np.int64)
        w = self.windows
        win = Windows(
            w.input_ids[r], w.attention_mask[r], None if w.token_type_ids is None else w.token_type_ids[r],
            np.asarray(owner, dtype=np.int64), w.context[r], w.char_start[r], w.char_end[r],
        )
        return WindowLogits(win, [self.texts[i] for i in passages], self.start[r], self.end[r], self.select[r], self.ms)


class Reader:
    """A loaded reader; ``read(question, passages)`` → answers, best first.

    ``defaults`` overlay the registry's (``reader_spec().defaults()``); each
    call may override them. Passages are ``(title line, text)`` pairs, the
    title line as the passage encoder sees it (document title, section path).
    """

    spec: MethodSpec = reader_spec()

    def __init__(self, path: str | Path, batch_size: int = 32, device: str | None = "auto", **defaults: Any) -> None:
        """``device``: ``auto`` (a GPU when torch sees one), ``cpu`` or ``cuda``; on a GPU the reader runs in float16."""
        if batch_size < 1:
            raise BadInputError("batch_size must be positive")
        self.path = Path(path)
        self.model, self.tokenizer, self.meta = load_reader_model(self.path)
        self.device = resolve_device(device)
        if self.device == "cuda":
            self.model.half().to(self.device)
        self.batch_size = batch_size
        self.defaults = {**self.spec.defaults(), **self.spec.check(defaults), "reader": str(self.path)}

    @property
    def name(self) -> str:
        return self.path.name

    def params(self, given: Mapping[str, Any] | None = None) -> dict[str, Any]:
        return {**self.defaults, **self.spec.check({k: v for k, v in (given or {}).items() if k != "reader"})}

    def logits(self, question: str, passages: Sequence[tuple[str, str]]) -> WindowLogits:
        """Every window of every passage through the model, in batches trimmed to their longest window."""
        import torch

        t = time.perf_counter()
        win = make_windows(self.tokenizer, question, passages, self.meta["max_length"], self.meta["stride"])
        n, length = win.input_ids.shape
        start = np.full((n, length), -1e4, dtype=np.float32)
        end = np.full((n, length), -1e4, dtype=np.float32)
        select = np.zeros(n, dtype=np.float32)
        lengths = win.attention_mask.sum(axis=1)
        order = np.argsort(-lengths, kind="stable")  # similar lengths together: less padding per batch
        with torch.inference_mode():
            for i in range(0, n, self.batch_size):
                rows = order[i : i + self.batch_size]
                m = int(lengths[rows].max())
                feed = {
                    "input_ids": torch.from_numpy(win.input_ids[rows, :m]),
                    "attention_mask": torch.from_numpy(win.attention_mask[rows, :m]),
                }
                if win.token_type_ids is not None:
                    feed["token_type_ids"] = torch.from_numpy(win.token_type_ids[rows, :m])
                out = self.model(**{k: v.to(self.device) for k, v in feed.items()})
                start[rows, :m] = out["start_logits"].float().cpu().numpy()
                end[rows, :m] = out["end_logits"].float().cpu().numpy()
                select[rows] = out["select_logits"].float().cpu().numpy()
        texts = [x for _, x in passages]
        return WindowLogits(win, texts, start, end, select, (time.perf_counter() - t) * 1000.0)

    def decode(self, lg: WindowLogits, upto: int | None = None, **given: Any) -> list[Answer]:
        """Answers from the windows of the first ``upto`` passages (all by default), merged and ranked."""
        p = self.params(given)
        keep = lg.upto(len(lg.texts) if upto is None else upto)
        w = lg.windows
        cands = window_candidates(
            lg.texts, w.passage[keep], w.char_start[keep], w.char_end[keep], w.context[keep],
            lg.start[keep], lg.end[keep], lg.select[keep], p["max_answer_tokens"], p["passage_weight"],
        )
        return merge(cands, p["merge"])[: p["answers"]]

    def read(self, question: str, passages: Sequence[tuple[str, str]], **given: Any) -> list[Answer]:
        return self.decode(self.logits(question, passages), **given)
