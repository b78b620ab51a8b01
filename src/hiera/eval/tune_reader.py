"""A reader's decoding calibrated on train questions over a collection's retrieval (``hiera tune-reader``).

A reader fresh from ``hiera train-reader`` decodes with the registry's
weights, which ignore the passage's retrieval rank: reading 20 passages then
often answers from a distractor the first passage did not hold, and EM falls
as read-k grows. Here every question is retrieved once at the largest read-k,
read once, and :func:`hiera.read.calibrate.calibrate` scores every setting of
the grid at every read-k from those spans; the chosen weights are the best
mean EM among the settings that never lose by reading more (on these
questions), and are saved into the reader, whose defaults they become.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tqdm import tqdm

from hiera.errors import BadInputError
from hiera.eval.questions import Question
from hiera.eval.read import score_answer
from hiera.read.calibrate import calibrate, grid_of, spans_of
from hiera.read.pipeline import title_line
from hiera.spec import reader_spec

BATCH = 16  # questions retrieved per batch_search


def tune_reader(reader: Any, retriever: Any, questions: Sequence[Question], read_ks: Sequence[int], sep: str,
                progress: bool = False) -> dict[str, Any]:
    """The calibration report (:func:`hiera.read.calibrate.calibrate`) of ``reader`` over ``retriever``'s passages
    for ``questions`` (answer strings needed), read at ``read_ks``."""
    qs = [q for q in questions if q.answers]
    if not qs:
        raise BadInputError("calibrating a reader needs questions with answers")
    ks = sorted(set(read_ks))
    if not ks or ks[0] < 1:
        raise BadInputError(f"--read-k must be positive integers, got {list(read_ks)}")
    p = reader.params()
    readings = []
    for i in tqdm(range(0, len(qs), BATCH), desc="calibrate reader", disable=not progress, leave=False):
        batch = qs[i : i + BATCH]
        for res, q in zip(retriever.batch_search([q.text for q in batch], k=ks[-1], level="passage"), batch,
                          strict=True):
            lg = reader.logits(q.text, [(title_line(h, sep), h.text) for h in res.hits])
            readings.append((spans_of(lg, p["max_answer_tokens"]), lambda pred, q=q: score_answer(pred, q)[0]))
    report = calibrate(readings, ks, grid_of(reader_spec()))
    report["retriever"] = retriever.name
    return report
