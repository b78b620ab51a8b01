"""Decoding that never loses with more evidence: the rank prior and its calibration, on hand-made logits."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from hiera.read.calibrate import Setting, calibrate, grid_of, save_decoding, spans_of, top_answer
from hiera.read.decode import merge, window_candidates
from hiera.read.features import Windows
from hiera.read.reader import WindowLogits
from hiera.spec import reader_spec
from hiera.text import exact_match

WORDS = 8  # tokens per window: one word each, all of them passage text


def reading(texts: list[str], start: np.ndarray, end: np.ndarray, select: np.ndarray) -> WindowLogits:
    """One window per passage, a token per word, logits as given."""
    n = len(texts)
    cs = np.full((n, WORDS), -1)
    ce = np.full((n, WORDS), -1)
    ctx = np.zeros((n, WORDS), dtype=bool)
    for p, t in enumerate(texts):
        at = 0
        for i, w in enumerate(t.split()[:WORDS]):
            s = t.index(w, at)
            cs[p, i], ce[p, i], ctx[p, i] = s, s + len(w), True
            at = s + len(w)
    z = np.zeros((n, WORDS), dtype=np.int64)
    win = Windows(z, z + 1, None, np.arange(n), ctx, cs, ce)
    return WindowLogits(win, texts, start, end, select, 0.0)


def question(rng: np.random.Generator, fooled: bool, gold_first: bool, k: int = 20) -> tuple[WindowLogits, str]:
    """Passage 0 holds the answer (or, when not ``gold_first``, passage 3 does); ``fooled``: a later passage's
    distractor has the sharper span and the higher selection logit."""
    texts = [" ".join(f"w{p}x{i}" for i in range(WORDS)) for p in range(k)]
    gold_at = 0 if gold_first else 3
    start = rng.normal(0, 0.3, (k, WORDS))
    end = rng.normal(0, 0.3, (k, WORDS))
    select = rng.normal(0, 0.3, k)
    start[gold_at, 2] = end[gold_at, 2] = 4.0
    select[gold_at] = 2.0
    for p in range(k):
        if p != gold_at:
            start[p, 5] = end[p, 5] = 2.5  # every other passage has a plausible wrong span
    if fooled:
        d = int(rng.integers(5, k))
        start[d, 5] = end[d, 5] = 6.0
        select[d] = 3.0
    return reading(texts, start, end, select), f"w{gold_at}x2"


def test_the_rank_prior_keeps_the_first_passages_answer_and_shows_in_each_candidate():
    lg, gold = question(np.random.default_rng(0), fooled=True, gold_first=True)
    w = lg.windows
    flat = merge(window_candidates(lg.texts, w.passage, w.char_start, w.char_end, w.context, lg.start, lg.end,
                                   lg.select, 30))
    assert flat[0].text != gold  # reading 20 passages without a prior loses the first passage's answer
    ranked = merge(window_candidates(lg.texts, w.passage, w.char_start, w.char_end, w.context, lg.start, lg.end,
                                     lg.select, 30, rank_weight=4.0))
    assert ranked[0].text == gold
    for a in ranked:
        c = a.evidence[0]
        assert c.score == pytest.approx(c.span + c.select + c.rank)
        assert c.rank == pytest.approx(-4.0 * np.log1p(c.passage))


def test_the_fast_scorer_agrees_with_decoding_for_every_setting():
    rng = np.random.default_rng(1)
    for trial in range(12):
        k = int(rng.integers(2, 7))
        texts = [" ".join(rng.choice(["a", "b", "c", "d", "e"], WORDS)) for _ in range(k)]  # repeated strings merge
        lg = reading(texts, rng.normal(0, 2, (k, WORDS)), rng.normal(0, 2, (k, WORDS)), rng.normal(0, 1, k))
        sp = spans_of(lg, 3)
        for st in [Setting(pw, rw, m) for pw in (0.0, 1.0, 4.0) for rw in (0.0, 2.0) for m in ("max", "sum")]:
            for upto in (1, k):
                keep = lg.upto(upto)
                w = lg.windows
                want = merge(window_candidates(lg.texts, w.passage[keep], w.char_start[keep], w.char_end[keep],
                                               w.context[keep], lg.start[keep], lg.end[keep], lg.select[keep], 3,
                                               st.passage_weight, rank_weight=st.rank_weight), st.merge)
                assert top_answer(sp, upto, st.passage_weight, st.rank_weight, st.merge) == want[0].text, (trial, st, upto)


def test_calibration_chooses_weights_under_which_reading_more_never_loses():
    rng = np.random.default_rng(2)
    readings = []
    for i in range(60):
        # a third of the questions have a fooling distractor; a sixth hold the answer in passage 3, not 0
        lg, gold = question(rng, fooled=i % 3 == 0, gold_first=i % 6 != 1)
        readings.append((spans_of(lg, 30), lambda pred, g=gold: exact_match(pred, [g])))
    settings = grid_of(reader_spec())
    out = calibrate(readings, (1, 5, 20), settings)
    em = out["chosen_em"]
    assert out["any_never_loses"] and em["never_loses"]
    assert em["em@20"] >= em["em@1"] and em["em@5"] >= em["em@1"]
    assert out["chosen"]["rank_weight"] > 0
    # the registry's defaults (no prior) lose answers by reading more here: the calibration is what fixes it
    plain = next(r for r in out["settings"] if r["passage_weight"] == 1.0 and r["rank_weight"] == 0.0
                 and r["merge"] == "max")
    assert plain["em@20"] < plain["em@1"]
    assert em["mean"] >= plain["mean"]
    with pytest.raises(ValueError):
        calibrate([], (1, 20), settings)


def test_a_calibrated_reader_decodes_with_its_weights(tiny_reader: Path, tmp_path: Path):
    import shutil

    from hiera.read.model import META_FILE
    from hiera.read.reader import Reader

    rd = tmp_path / "rd"
    shutil.copytree(tiny_reader, rd)
    save_decoding(rd, {"passage_weight": 0.5, "rank_weight": 2.0, "merge": "sum"}, {"questions": 3, "settings": []})
    meta = json.loads((rd / META_FILE).read_text(encoding="utf-8"))
    assert meta["decoding"]["rank_weight"] == 2.0 and "settings" not in meta["decoding_calibration"]
    r = Reader(rd, device="cpu")
    assert r.params()["rank_weight"] == 2.0 and r.params()["merge"] == "sum"
    assert r.params({"rank_weight": 0.0})["rank_weight"] == 0.0  # a caller's value still wins
