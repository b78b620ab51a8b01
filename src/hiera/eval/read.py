"""End-to-end answer quality: read each retriever's top passages and score the answers (SQuAD EM/F1).

Each question's top ``max(read_ks)`` passages are run through the reader
once; the answers at every read-k come from the windows of the first k
passages (the selection softmax taken over those only), so ``em@1``, ``em@5``
and ``em@20`` cost one reading. Regex gold answers (CuratedTREC) count an
exact match when a pattern matches the whole prediction; they have no F1.

Beside EM/F1: ``lost@K`` (``gained@K``), the share of questions answered
right at the smallest read-k and wrong at K (the reverse), and, for
open-domain questions with answer strings (NQ-open, TriviaQA),
``answerable@K``, the share whose answer string (DPR's ``has_answer``) is in
the top K passages, K the largest read-k, with ``em@k_answerable`` the EM at
every read-k over those same questions (one subset, so the read-ks compare):
what the reader makes of the questions retrieval made answerable.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import regex
from tqdm import tqdm

from hiera.eval.match import passage_has_answer
from hiera.eval.metrics import latency_percentiles
from hiera.eval.questions import Question
from hiera.read.pipeline import title_line
from hiera.results import Hit, Results
from hiera.text import exact_match, f1, squad_normalize


def _pattern(answer: str) -> regex.Pattern[str] | None:
    """A regex gold answer compiled, or ``None`` when it does not compile: it matches nothing, as retrieval's
    ``has_answer`` treats it, so one bad pattern in a questions file costs that answer, not the evaluation."""
    try:
        return regex.compile(answer, flags=regex.IGNORECASE)
    except Exception:  # regex raises its own error class, and others on odd input
        return None


def score_answer(prediction: str, q: Question) -> tuple[float, float | None]:
    """(EM, F1) of one prediction against a question's gold answers."""
    if q.answer_mode == "regex":
        pred = squad_normalize(prediction)
        ok = any(pat.fullmatch(prediction) or pat.fullmatch(pred) for p in q.answers if (pat := _pattern(p)) is not None)
        return float(bool(ok)), None
    return exact_match(prediction, q.answers), f1(prediction, q.answers)


def read_hits(
    reader: Any,
    questions: Sequence[Question],
    hit_lists: Sequence[Sequence[Hit]],
    read_ks: Sequence[int],
    params: dict[str, Any] | None = None,
    sep: str = ", ",
    progress: bool = False,
    desc: str = "read",
) -> tuple[dict[str, float], list[dict[str, Any]]]:
    """``em@K``/``f1@K`` for each read-k, the reader's latency, and each question's predictions."""
    params = dict(params or {})
    kmax = max(read_ks)
    kmin = min(read_ks)
    em = {k: 0.0 for k in read_ks}
    f1s = {k: 0.0 for k in read_ks}
    em_answerable = {k: 0.0 for k in read_ks}
    lost = {k: 0 for k in read_ks}
    gained = {k: 0 for k in read_ks}
    answerable = 0
    has_f1 = True
    ms: list[float] = []
    rows: list[dict[str, Any]] = []
    for q, hits in tqdm(list(zip(questions, hit_lists, strict=True)), desc=desc, unit="q", disable=not progress,
                        leave=False):
        top = [h for h in hits if h.passage_id is not None][:kmax]
        t = time.perf_counter()
        lg = reader.logits(q.text, [(title_line(h, sep), h.text) for h in top], reader.params(params)["part_words"])
        row: dict[str, Any] = {"id": q.id, "question": q.text, "gold": list(q.answers)}
        can = any(passage_has_answer(h, q.answers, q.answer_mode) for h in top)
        answerable += can
        right: dict[int, float] = {}
        for k in read_ks:
            answers = reader.decode(lg, upto=k, **params)
            pred = answers[0].text if answers else ""
            e, f = score_answer(pred, q)
            right[k] = e
            em[k] += e
            em_answerable[k] += e if can else 0.0
            if f is None:
                has_f1 = False
            else:
                f1s[k] += f
            row[f"pred@{k}"] = pred
        for k in read_ks:
            lost[k] += right[kmin] > right[k]
            gained[k] += right[k] > right[kmin]
        row["answerable"] = can
        ms.append((time.perf_counter() - t) * 1000.0)
        rows.append(row)
    n = max(len(questions), 1)
    out: dict[str, float] = {}
    for k in read_ks:
        out[f"em@{k}"] = em[k] / n
        if has_f1:
            out[f"f1@{k}"] = f1s[k] / n
        if k != kmin:
            out[f"lost@{k}"], out[f"gained@{k}"] = lost[k] / n, gained[k] / n
    if any(not q.gold_passages for q in questions):
        # answers without gold passages (NQ-open, TriviaQA, CuratedTREC): what retrieval made answerable, read
        out[f"answerable@{kmax}"] = answerable / n
        for k in read_ks:
            out[f"em@{k}_answerable"] = em_answerable[k] / max(answerable, 1)
    if ms:
        lat = latency_percentiles(ms)
        out["latency_read_ms_p50"], out["latency_read_ms_p95"] = lat["latency_ms_p50"], lat["latency_ms_p95"]
    return out, rows


def read_runs(
    reader: Any, questions: Sequence[Question], runs: Sequence[Results], read_ks: Sequence[int], **kw: Any
) -> tuple[dict[str, float], list[dict[str, Any]]]:
    """:func:`read_hits` over a retriever's passage runs (``hiera eval --reader``)."""
    return read_hits(reader, questions, [r.hits for r in runs], read_ks, **kw)
