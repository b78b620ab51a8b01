"""Span decoding and answer merging against hand-made logits, and windows over real tokenization."""

from __future__ import annotations

import numpy as np
import pytest

from hiera.read.decode import Candidate, best_spans, merge, window_candidates
from hiera.read.features import make_windows, passage_input, token_span


@pytest.fixture(scope="module")
def tokenizer():
    from transformers import AutoTokenizer

    from hiera.encode import resolve_model_path

    return AutoTokenizer.from_pretrained(str(resolve_model_path("all-MiniLM-L6-v2")))


def _logits(n: int, peaks: dict[int, float]) -> np.ndarray:
    x = np.zeros(n)
    for i, v in peaks.items():
        x[i] = v
    return x


def test_a_start_after_its_end_is_never_a_span():
    ctx = np.ones(10, dtype=bool)
    start = _logits(10, {7: 9.0, 2: 4.0})
    end = _logits(10, {3: 9.0, 8: 4.0})
    spans = best_spans(start, end, ctx, max_answer_tokens=30)
    assert all(s.start <= s.end for s in spans)
    # the best start (7) only pairs with the weaker end (8); the best end (3) with the weaker start (2)
    assert (spans[0].start, spans[0].end) in {(7, 8), (2, 3)}
    assert {(spans[0].start, spans[0].end), (spans[1].start, spans[1].end)} == {(7, 8), (2, 3)}


def test_spans_longer_than_the_limit_are_dropped():
    ctx = np.ones(20, dtype=bool)
    start = _logits(20, {1: 10.0, 12: 2.0})
    end = _logits(20, {15: 10.0, 13: 2.0})
    assert (best_spans(start, end, ctx, max_answer_tokens=30)[0][:2]) == (1, 15)
    top = best_spans(start, end, ctx, max_answer_tokens=5)
    assert all(s.end - s.start + 1 <= 5 for s in top)
    assert top[0][:2] == (12, 15)  # 4 tokens, the strongest end within reach of a start
    assert (1, 15) not in [(s.start, s.end) for s in top]


def test_tokens_outside_the_passage_never_answer():
    ctx = np.zeros(12, dtype=bool)
    ctx[5:10] = True
    start = _logits(12, {1: 50.0, 6: 1.0})  # a question token with a huge logit
    end = _logits(12, {2: 50.0, 7: 1.0})
    spans = best_spans(start, end, ctx, 10)
    assert spans and all(5 <= s.start <= s.end < 10 for s in spans)
    assert best_spans(start, end, np.zeros(12, dtype=bool), 10) == []


def test_ties_go_to_the_earlier_then_shorter_span():
    ctx = np.ones(8, dtype=bool)
    flat = np.zeros(8)
    spans = best_spans(flat, flat, ctx, max_answer_tokens=3)
    assert (spans[0].start, spans[0].end) == (0, 0)
    assert spans[0].score == pytest.approx(spans[1].score)
    assert [(s.start, s.end) for s in spans[:3]] == [(0, 0), (0, 1), (0, 2)]


def test_identical_answers_from_several_passages_merge_and_keep_their_evidence():
    cands = [
        Candidate("the Eiffel Tower", np.log(0.3), 0, 10, 26),
        Candidate("Eiffel Tower", np.log(0.2), 2, 4, 16),
        Candidate("Louvre", np.log(0.4), 1, 0, 6),
        Candidate("Eiffel Tower", np.log(0.2), 2, 4, 16),  # the same span from an overlapping window
    ]
    by_max = merge(cands, "max")
    assert [a.text for a in by_max] == ["Louvre", "the Eiffel Tower"]
    eiffel = by_max[1]
    assert [(c.passage, c.start) for c in eiffel.evidence] == [(0, 10), (2, 4)]
    by_sum = merge(cands, "sum")
    assert by_sum[0].text == "the Eiffel Tower"
    assert np.exp(by_sum[0].score) == pytest.approx(0.5)
    with pytest.raises(ValueError):
        merge(cands, "mean")


def test_offsets_point_at_the_answer_in_the_passage(tokenizer):
    text = "The Normans were a people who in the 10th and 11th centuries gave their name to Normandy, a region in France."
    win = make_windows(tokenizer, "Where is Normandy?", [("Normans", text)], max_length=64, stride=16)
    a = text.index("France")
    span = token_span(win, 0, a, a + len("France"))
    assert span is not None
    s, e = span
    assert text[win.char_start[0, s] : win.char_end[0, e]] == "France"
    # the title is read but is never part of an answer
    second, shift = passage_input("Normans", text)
    assert second[shift:] == text
    assert win.char_start[0][win.context[0]].min() == 0


def test_an_answer_cut_by_a_window_boundary_is_whole_in_the_next(tokenizer):
    words = [f"word{i}" for i in range(120)]
    text = " ".join(words)
    win = make_windows(tokenizer, "which word?", [("T", text)], max_length=48, stride=16)
    assert len(win) > 2 and set(win.passage) == {0}
    # every character of the passage is in some window: nothing was truncated away
    covered = np.zeros(len(text), dtype=bool)
    for w in range(len(win)):
        c = win.context[w]
        for s, e in zip(win.char_start[w][c], win.char_end[w][c], strict=True):
            covered[s:e] = True
    assert covered[[i for i, ch in enumerate(text) if ch != " "]].all()
    # an answer straddling the end of window 0 is not in window 0, but is whole in window 1
    ctx0 = np.flatnonzero(win.context[0])
    last_char = int(win.char_end[0, ctx0[-1]])
    a_start = text.rfind(" ", 0, last_char - 3) + 1
    a_end = text.find(" ", last_char + 1)
    answer = text[a_start:a_end]
    assert token_span(win, 0, a_start, a_end) is None
    s, e = token_span(win, 1, a_start, a_end)
    # hand-made logits that point at it in window 1 decode to exactly that text and those offsets
    n, length = win.input_ids.shape
    start, end = np.zeros((n, length)), np.zeros((n, length))
    start[1, s], end[1, e] = 20.0, 20.0
    cands = window_candidates([text], win.passage, win.char_start, win.char_end, win.context, start, end,
                              np.zeros(n), max_answer_tokens=30)
    best = merge(cands)[0]
    assert best.text == answer and (best.start, best.end) == (a_start, a_end)


def test_selection_scores_rank_passages(tokenizer):
    texts = ["Paris is the capital of France.", "Berlin is the capital of Germany."]
    win = make_windows(tokenizer, "capital?", [("A", texts[0]), ("B", texts[1])], max_length=32, stride=8)
    n, length = win.input_ids.shape
    start, end = np.zeros((n, length)), np.zeros((n, length))
    for w in range(n):  # the same span strength in both passages: the first token of each
        first = np.flatnonzero(win.context[w])[0]
        start[w, first] = end[w, first] = 10.0
    select = np.where(win.passage == 1, 3.0, 0.0)
    cands = window_candidates(texts, win.passage, win.char_start, win.char_end, win.context, start, end, select, 10)
    assert merge(cands)[0].text == "Berlin"
    flat = window_candidates(texts, win.passage, win.char_start, win.char_end, win.context, start, end, select, 10,
                             passage_weight=0.0)
    assert merge(flat)[0].score == pytest.approx(merge(flat)[1].score)


def test_a_long_passage_is_read_as_the_parts_the_corpus_makes_of_it(tokenizer):
    from hiera.corpus.split import split_words
    from hiera.read.features import passage_parts

    sentences = [f"Sentence {i} tells that item{i} was made in {1800 + i}." for i in range(40)]
    text = "  ".join(sentences)  # doubled spaces: parts keep the passage's own characters
    extents = passage_parts(text, 30)
    assert len(extents) > 3
    assert [" ".join(text[s:e].split()) for s, e in extents] == split_words(text, 30)
    assert passage_parts("short text", 30) == [(0, 10)] and passage_parts(text, 0) == [(0, len(text))]
    whole = make_windows(tokenizer, "When was item7 made?", [("T", text), ("U", "item7 was made in 1900.")], 64, 16,
                         part_words=30)
    parts = make_windows(tokenizer, "When was item7 made?", [("T", text[s:e]) for s, e in extents], 64, 16)
    n = len(parts)
    assert np.array_equal(whole.input_ids[:n], parts.input_ids)  # the same windows the parts make
    assert set(whole.passage[:n]) == {0} and set(whole.passage[n:]) == {1}
    for w in range(n):  # offsets point into the whole passage, at the characters the part's offsets point at
        c = parts.context[w]
        s0 = extents[int(parts.passage[w])][0]
        assert np.array_equal(whole.char_start[w][c], parts.char_start[w][c] + s0)
        for a, b in zip(whole.char_start[w][c], whole.char_end[w][c], strict=True):
            assert text[a:b].strip() and " " not in text[a:b]


def test_answers_are_whole_words_even_when_a_word_piece_scores_best(tokenizer):
    """'Asunción' is several word pieces: logits that prefer a piece inside it still decode to whole words."""
    text = "Asunción is the capital and largest city of Paraguay, on the river."
    win = make_windows(tokenizer, "capital?", [("Paraguay", text)], max_length=48, stride=8)
    ctx = np.flatnonzero(win.context[0])
    pieces = [t for t in ctx if win.char_end[0, t] <= len("Asunción")]
    assert len(pieces) >= 2  # the word really is split, or the test proves nothing
    n, length = win.input_ids.shape
    start, end = np.zeros((n, length)), np.zeros((n, length))
    start[0, pieces[1]] = 20.0  # the best start is the second piece ("…ción"), a strong end is the word's end
    end[0, pieces[-1]] = 20.0
    start[0, pieces[0]] = 5.0
    cands = window_candidates([text], win.passage, win.char_start, win.char_end, win.context, start, end,
                              np.zeros(n), max_answer_tokens=10)
    assert cands and all((c.start == 0 or not text[c.start - 1].isalnum()) for c in cands)
    assert all((c.end == len(text) or not text[c.end].isalnum()) for c in cands)
    assert merge(cands)[0].text == "Asunción"
    # a comma after a word still ends it: "Paraguay" is a whole-word span
    para = text.index("Paraguay")
    p_tok = [t for t in ctx if para <= win.char_start[0, t] < para + len("Paraguay")]
    start[0], end[0] = 0.0, 0.0
    start[0, p_tok[0]], end[0, p_tok[-1]] = 20.0, 20.0
    cands = window_candidates([text], win.passage, win.char_start, win.char_end, win.context, start, end,
                              np.zeros(n), max_answer_tokens=10)
    assert merge(cands)[0].text == "Paraguay"
