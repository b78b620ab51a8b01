"""Decoding weights chosen on train questions so that reading more passages never costs answers on average.

An answer's score adds the span log-probability, ``passage_weight`` times the
selection log-probability and ``−rank_weight · log(1 + rank)``
(:mod:`hiera.read.decode`). :func:`calibrate` reads each question's ranked
passages once, takes every window's candidate spans once (they do not depend
on the weights), and scores every setting of the grid at every read-k from
those, so a grid of 60 settings costs little more than one decoding. The
chosen setting has the best mean EM over the read-ks among the settings
whose EM at every k is at least their EM at the smallest k (reading more
never loses, on the calibration questions); if none qualifies, the one whose
worst loss is smallest. Ties keep the smaller weights.

:func:`save_decoding` writes the choice into the reader's
``hiera-reader.json`` (``decoding``), which :class:`hiera.read.reader.Reader`
takes as its defaults: a calibrated reader decodes that way unless told
otherwise.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from hiera.read.decode import best_spans, log_softmax, word_bounds
from hiera.text import squad_normalize

META_KEY = "decoding"


@dataclass
class Spans:
    """Every window's candidate spans of one question's reading, weight-free: what each setting re-scores."""

    span: np.ndarray  # [C] span log-probability
    window: np.ndarray  # [C] window index
    passage: np.ndarray  # [C] passage index (retrieval rank)
    key: np.ndarray  # [C] normalized answer string (merged answers share it)
    where: np.ndarray  # [C] index of the distinct (passage, start, end) span
    texts: list[str]  # [C] the span's text
    select: np.ndarray  # [W] selection logits
    window_passage: np.ndarray  # [W]


def spans_of(lg: Any, max_answer_tokens: int, top_n: int = 20) -> Spans:
    """The candidate spans of a :class:`hiera.read.reader.WindowLogits` (as ``window_candidates`` finds them)."""
    w = lg.windows
    span, window, passage, key, where = [], [], [], [], []
    keys: dict[str, int] = {}
    texts: list[str] = []
    spots: dict[tuple[int, int, int], int] = {}
    for i in range(len(w)):
        p = int(w.passage[i])
        bounds = word_bounds(lg.texts[p], w.char_start[i], w.char_end[i], w.context[i])
        for sp in best_spans(lg.start[i], lg.end[i], w.context[i], max_answer_tokens, top_n, bounds):
            s, e = int(w.char_start[i, sp.start]), int(w.char_end[i, sp.end])
            text = lg.texts[p][s:e]
            norm = squad_normalize(text)
            if not norm:
                continue
            texts.append(text)
            span.append(sp.score)
            window.append(i)
            passage.append(p)
            key.append(keys.setdefault(norm, len(keys)))
            where.append(spots.setdefault((p, s, e), len(spots)))
    arr = lambda x, t=np.int64: np.asarray(x, dtype=t)  # noqa: E731
    return Spans(arr(span, np.float64), arr(window), arr(passage), arr(key), arr(where), texts,
                 np.asarray(lg.select, dtype=np.float64), np.asarray(w.passage, dtype=np.int64))


def top_answer(sp: Spans, upto: int, passage_weight: float, rank_weight: float, merge: str) -> str:
    """The best answer's text reading the first ``upto`` passages: :meth:`Reader.decode`'s first answer, faster."""
    keep_w = sp.window_passage < upto
    if not keep_w.any():
        return ""
    c = np.flatnonzero(sp.passage < upto)
    if c.size == 0:
        return ""
    sel = np.full(len(sp.select), -np.inf)
    sel[keep_w] = log_softmax(sp.select[keep_w])
    score = sp.span[c] + passage_weight * sel[sp.window[c]] - rank_weight * np.log1p(sp.passage[c])
    if merge == "max":
        return sp.texts[c[int(np.argmax(score))]]
    # sum: each distinct span once (its best window), then the probabilities of a string's spans added;
    # the answer's text is its best span's
    spot_best = np.full(int(sp.where.max()) + 1, -np.inf)
    np.maximum.at(spot_best, sp.where[c], score)
    have = np.isfinite(spot_best)
    spot_key = np.zeros(len(spot_best), dtype=np.int64)
    spot_key[sp.where[c]] = sp.key[c]
    total = np.zeros(int(sp.key.max()) + 1)
    np.add.at(total, spot_key[have], np.exp(spot_best[have] - spot_best[have].max()))
    group = np.flatnonzero(sp.key[c] == int(np.argmax(total)))
    return sp.texts[c[group[int(np.argmax(score[group]))]]]


@dataclass
class Setting:
    passage_weight: float
    rank_weight: float
    merge: str

    def as_params(self) -> dict[str, Any]:
        return {"passage_weight": self.passage_weight, "rank_weight": self.rank_weight, "merge": self.merge}


def grid_of(spec: Any) -> list[Setting]:
    """Every setting of the registry's grids (``passage_weight`` × ``rank_weight`` × ``merge``)."""
    return [Setting(w, r, m) for w, r, m in itertools.product(
        spec.param("passage_weight").grid, spec.param("rank_weight").grid, spec.param("merge").choices)]


def calibrate(
    readings: Sequence[tuple[Spans, Callable[[str], float]]],
    read_ks: Sequence[int],
    settings: Sequence[Setting],
) -> dict[str, Any]:
    """The chosen setting and every setting's EM (%) at each read-k over ``readings`` (spans, scorer of a prediction)."""
    ks = sorted(set(read_ks))
    if not readings or not settings:
        raise ValueError("calibration needs questions and settings")
    em = np.zeros((len(settings), len(ks)))
    for sp, score in readings:
        for i, st in enumerate(settings):
            for j, k in enumerate(ks):
                em[i, j] += score(top_answer(sp, k, st.passage_weight, st.rank_weight, st.merge))
    em *= 100.0 / len(readings)
    loss = (em[:, :1] - em).max(axis=1)  # the worst drop from the smallest k, in points (≤ 0: never loses)
    mean = em.mean(axis=1)
    never = loss <= 1e-9
    simple = [(-(s.passage_weight + s.rank_weight), s.merge == "max") for s in settings]
    pool = np.flatnonzero(never) if never.any() else np.flatnonzero(loss == loss.min())
    best = max(pool, key=lambda i: (round(mean[i], 9), simple[i]))
    rows = [{**st.as_params(), **{f"em@{k}": round(float(em[i, j]), 2) for j, k in enumerate(ks)},
             "mean": round(float(mean[i]), 2), "never_loses": bool(never[i])} for i, st in enumerate(settings)]
    return {"questions": len(readings), "read_ks": ks, "chosen": settings[best].as_params(),
            "chosen_em": rows[best], "settings": rows, "any_never_loses": bool(never.any())}


def save_decoding(reader_dir: Path, chosen: dict[str, Any], report: dict[str, Any]) -> None:
    """Record the calibrated decoding in the reader's metadata (its defaults from now on)."""
    import json

    from hiera.io import write_json_atomic
    from hiera.read.model import META_FILE

    path = Path(reader_dir) / META_FILE
    meta = json.loads(path.read_text(encoding="utf-8"))
    meta[META_KEY] = dict(chosen)
    meta["decoding_calibration"] = {k: v for k, v in report.items() if k != "settings"}
    write_json_atomic(path, meta)
