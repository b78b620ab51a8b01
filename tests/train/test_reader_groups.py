"""Reader training groups from answer strings alone (distant supervision, as DPR trained its reader)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from readdata import RULES

from hiera.builds import open_collection
from hiera.eval.questions import Question, load_squad
from hiera.train.args import ReaderArgs
from hiera.train.pool import PassagePool
from hiera.train.reader import base_reader, reader_groups


def test_questions_without_gold_passages_train_on_the_passages_that_hold_their_answer(squad_tiny: tuple[Path, Path]):
    root, qfile = squad_tiny
    col = open_collection(root)
    pool = PassagePool.from_collection(col)
    squad = load_squad(qfile, rules=RULES)
    # the same questions as an open-domain set gives them: text and answer strings, no gold passage or document
    open_qs = [Question(q.id, q.text, list(q.answers)) for q in squad]
    args = ReaderArgs(negatives=1, max_length=96, stride=32, progress=False)
    tokenizer, _ = base_reader(args)
    groups, rep = reader_groups(col, pool, tokenizer, open_qs, args)
    assert rep.groups > 0 and rep.positives_gold == 0  # every positive found by BM25 + answer matching
    # each group's first window is labelled at a span that reads as one of the questions' answers
    answers = {a.lower() for q in open_qs for a in q.answers}
    spans = [tokenizer.decode(np.asarray(g["input_ids"][0])[g["start_positions"] : g["end_positions"] + 1]).lower()
             for g in groups]
    assert all(s.strip() for s in spans)
    assert sum(s in answers for s in spans) >= len(spans) // 2, spans
