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
from hiera.read.features import Windows, concat_windows, make_windows
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
        model, tokenizer, meta = load_reader_model(Path(path))
        self._setup(Path(path), model, tokenizer, meta, batch_size, device, defaults)

    def _setup(self, path: Path, model: Any, tokenizer: Any, meta: dict[str, Any], batch_size: int,
               device: str | None, defaults: dict[str, Any]) -> None:
        self.path = path
        self.model, self.tokenizer, self.meta = model, tokenizer, meta
        self.device = resolve_device(device)
        if self.device == "cuda":
            self.model.half().to(self.device)
        self.batch_size = batch_size
        # a calibrated reader's decoding (hiera.read.calibrate) comes before the registry's, after the caller's
        calibrated = self.spec.check(dict(meta.get("decoding") or {}))
        self.defaults = {**self.spec.defaults(), **calibrated, **self.spec.check(defaults), "reader": str(self.path)}

    @classmethod
    def from_model(cls, model: Any, tokenizer: Any, meta: dict[str, Any], name: str = "in-memory",
                   batch_size: int = 32, device: str | None = "auto", **defaults: Any) -> Reader:
        """A reader over a model still in memory (a benchmark judging what it just trained, before saving it).

        ``meta`` needs the window ``max_length`` and ``stride``; on a GPU the
        model is converted to float16 in place, as a loaded reader is.
        """
        if batch_size < 1:
            raise BadInputError("batch_size must be positive")
        self = cls.__new__(cls)
        model.eval()
        self._setup(Path(name), model, tokenizer, meta, batch_size, device, defaults)
        return self

    @property
    def name(self) -> str:
        return self.path.name

    def params(self, given: Mapping[str, Any] | None = None) -> dict[str, Any]:
        return {**self.defaults, **self.spec.check({k: v for k, v in (given or {}).items() if k != "reader"})}

    def logits(self, question: str, passages: Sequence[tuple[str, str]], part_words: int | None = None) -> WindowLogits:
        """Every window of every passage through the model, in batches trimmed to their longest window."""
        t = time.perf_counter()
        win = self.windows(question, passages, part_words)
        start, end, select = self._run(win)
        texts = [x for _, x in passages]
        return WindowLogits(win, texts, start, end, select, (time.perf_counter() - t) * 1000.0)

    def windows(self, question: str, passages: Sequence[tuple[str, str]], part_words: int | None = None) -> Windows:
        """The model windows of ``passages`` for ``question`` (what :meth:`logits` reads); a passage longer than
        ``part_words`` (default: the reader's) is read as its parts."""
        words = self.defaults["part_words"] if part_words is None else self.spec.check({"part_words": part_words})["part_words"]
        return make_windows(self.tokenizer, question, passages, self.meta["max_length"], self.meta["stride"], words)

    def logits_many(self, items: Sequence[tuple[str, Sequence[tuple[str, str]]]],
                    windows: Sequence[Windows] | None = None) -> list[WindowLogits]:
        """:meth:`logits` of many ``(question, passages)`` at once: windows of all questions share batches.

        The same logits as one question at a time (a window's logits do not
        depend on its batch-mates beyond float rounding), far fewer model
        calls when each question has few windows (reading comprehension on a
        GPU). ``ms`` of each result is the whole call's time. ``windows``:
        the items' :meth:`windows` when already made (several readers of one
        window length judged on the same questions tokenize once).
        """
        t = time.perf_counter()
        wins = list(windows) if windows is not None else [self.windows(q, ps) for q, ps in items]
        if len(wins) != len(items):
            raise BadInputError(f"{len(wins)} windows for {len(items)} questions")
        if not wins:
            return []
        allwin = concat_windows(wins)
        start, end, select = self._run(allwin)
        ms = (time.perf_counter() - t) * 1000.0
        out, at = [], 0
        for (_, ps), win in zip(items, wins, strict=True):
            n = len(win)
            out.append(WindowLogits(win, [x for _, x in ps], start[at : at + n], end[at : at + n], select[at : at + n], ms))
            at += n
        return out

    def _run(self, win: Windows) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        import torch

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
        return start, end, select

    def decode(self, lg: WindowLogits, upto: int | None = None, **given: Any) -> list[Answer]:
        """Answers from the windows of the first ``upto`` passages (all by default), merged and ranked."""
        p = self.params(given)
        keep = lg.upto(len(lg.texts) if upto is None else upto)
        w = lg.windows
        cands = window_candidates(
            lg.texts, w.passage[keep], w.char_start[keep], w.char_end[keep], w.context[keep],
            lg.start[keep], lg.end[keep], lg.select[keep], p["max_answer_tokens"], p["passage_weight"],
            rank_weight=p["rank_weight"],
        )
        return merge(cands, p["merge"])[: p["answers"]]

    def read(self, question: str, passages: Sequence[tuple[str, str]], **given: Any) -> list[Answer]:
        return self.decode(self.logits(question, passages, self.params(given)["part_words"]), **given)
