"""(question, passage) pairs → fixed-length model windows with character offsets into the passage.

The model sees ``question [SEP] title ⏎ passage``: the title (the passage's
breadcrumb) disambiguates a passage that names its subject only in the
heading, as the passage encoder sees it. Answers may only come from the
passage text, so every window records which of its tokens are passage text
and where each starts and ends *in the passage string* (the title prefix is
subtracted). A passage longer than the window is split into overlapping
windows (``stride`` tokens shared by neighbours), so an answer cut by one
window boundary lies whole in the next: nothing is silently truncated.

A passage of more than ``part_words`` words (longer than the passages the
reader was trained on) is first cut into the parts the corpus would make of
it (:func:`hiera.corpus.split.split_words`: whole sentences, at most
``part_words`` words each), each read as its own passage and its offsets
mapped back: reading a long passage is then reading its parts, never worse.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from hiera.corpus.split import split_words
from hiera.errors import BadInputError

TITLE_SEP = "\n"


@dataclass
class Windows:
    """Tokenized windows of a batch of passages, all of one question."""

    input_ids: np.ndarray  # [W, L] int64
    attention_mask: np.ndarray  # [W, L]
    token_type_ids: np.ndarray | None  # [W, L], or None for models without segments
    passage: np.ndarray  # [W] index of the passage each window reads
    context: np.ndarray  # [W, L] bool: token is passage text (an answer may start/end there)
    char_start: np.ndarray  # [W, L] int: character offsets in the passage text (-1 outside it)
    char_end: np.ndarray  # [W, L]

    def __len__(self) -> int:
        return int(self.input_ids.shape[0])


def passage_input(title: str, text: str) -> tuple[str, int]:
    """The second segment the model reads, and where the passage text starts in it."""
    title = " ".join(title.split())
    prefix = f"{title}{TITLE_SEP}" if title else ""
    return prefix + text, len(prefix)


def passage_parts(text: str, part_words: int) -> list[tuple[int, int]]:
    """Character extents in ``text`` of the ≤``part_words``-word parts the corpus splitter makes of it.

    One extent, the whole text, when it is short enough or ``part_words`` is 0.
    Each part keeps the text's own characters (its whitespace included), so
    an offset in a part plus the part's start is an offset in ``text``.
    """
    words = text.split()
    if part_words <= 0 or len(words) <= part_words:
        return [(0, len(text))]
    offsets: list[tuple[int, int]] = []
    pos = 0
    for tok in words:
        start = text.index(tok, pos)
        pos = start + len(tok)
        offsets.append((start, pos))
    out, t = [], 0
    for block in split_words(text, part_words):
        n = len(block.split())
        out.append((offsets[t][0], offsets[t + n - 1][1]))
        t += n
    return out


def fit_question(tokenizer, question: str, max_length: int, stride: int) -> str:  # noqa: ANN001
    """``question`` cut to its first tokens when it would leave a window too little of the passage.

    A window is the question, the passage's tokens and 3 special tokens; the tokenizer needs more passage room
    than ``stride``, and a reader learns nothing from a window that is mostly question. So a question keeps at
    most half the window (and always room for more than ``stride`` passage tokens); a longer one, such as a pasted
    paragraph, is read by its beginning instead of failing.
    """
    keep = min(max_length // 2, max_length - stride - 4)
    if keep < 1:
        raise BadInputError(f"max_length {max_length} with stride {stride} leaves no room for the question")
    enc = tokenizer(question, add_special_tokens=False, return_offsets_mapping=True)
    offsets = enc["offset_mapping"]
    if len(offsets) <= keep:
        return question
    return question[: offsets[keep - 1][1]]


def make_windows(
    tokenizer,  # noqa: ANN001 - a Hugging Face fast tokenizer
    question: str,
    passages: Sequence[tuple[str, str]],
    max_length: int,
    stride: int,
    part_words: int = 0,
) -> Windows:
    """Every window of every ``(title, text)`` passage for ``question``, padded to ``max_length``.

    ``part_words`` > 0: a longer passage is read as its parts (:func:`passage_parts`);
    its windows still name the passage, with offsets into its whole text.
    """
    if not question.strip():
        raise BadInputError("the question is empty")
    if not passages:
        return _empty(max_length)
    question = fit_question(tokenizer, question, max_length, stride)
    if part_words > 0 and any(len(x.split()) > part_words for _, x in passages):
        return _windows_of_parts(tokenizer, question, passages, max_length, stride, part_words)
    seconds, shifts = zip(*(passage_input(t, x) for t, x in passages), strict=True)
    enc = tokenizer(
        [question] * len(passages),
        list(seconds),
        truncation="only_second",
        max_length=max_length,
        stride=stride,
        return_overflowing_tokens=True,
        return_offsets_mapping=True,
        padding="max_length",
    )
    n = len(enc["input_ids"])
    ids = np.asarray(enc["input_ids"], dtype=np.int64)
    mask = np.asarray(enc["attention_mask"], dtype=np.int64)
    types = np.asarray(enc["token_type_ids"], dtype=np.int64) if "token_type_ids" in enc else None
    owner = np.asarray(enc["overflow_to_sample_mapping"], dtype=np.int64)
    context = np.zeros(ids.shape, dtype=bool)
    cs = np.full(ids.shape, -1, dtype=np.int64)
    ce = np.full(ids.shape, -1, dtype=np.int64)
    for w in range(n):
        shift = shifts[owner[w]]
        seq = enc.sequence_ids(w)
        for t, (s, e) in enumerate(enc["offset_mapping"][w]):
            if seq[t] == 1 and e > s and s >= shift:
                context[w, t] = True
                cs[w, t] = s - shift
                ce[w, t] = e - shift
    return Windows(ids, mask, types, owner, context, cs, ce)


def _windows_of_parts(
    tokenizer,  # noqa: ANN001
    question: str,
    passages: Sequence[tuple[str, str]],
    max_length: int,
    stride: int,
    part_words: int,
) -> Windows:
    parts: list[tuple[str, str]] = []
    owner: list[int] = []
    shift: list[int] = []
    for i, (title, text) in enumerate(passages):
        for s, e in passage_parts(text, part_words):
            parts.append((title, text[s:e]))
            owner.append(i)
            shift.append(s)
    win = make_windows(tokenizer, question, parts, max_length, stride)
    by = np.asarray(shift, dtype=np.int64)[win.passage][:, None]
    inside = win.char_start >= 0
    return Windows(win.input_ids, win.attention_mask, win.token_type_ids, np.asarray(owner, dtype=np.int64)[win.passage],
                   win.context, np.where(inside, win.char_start + by, -1), np.where(inside, win.char_end + by, -1))


def concat_windows(wins: Sequence[Windows]) -> Windows:
    """Windows of several batches stacked (all of one ``max_length``); ``passage`` keeps each batch's own numbering."""
    typed = [w for w in wins if len(w)]  # an empty batch has no segment ids to disagree with
    types = None if any(w.token_type_ids is None for w in typed) else np.concatenate(
        [w.token_type_ids for w in typed] or [np.zeros_like(wins[0].input_ids)])
    return Windows(
        np.concatenate([w.input_ids for w in wins]), np.concatenate([w.attention_mask for w in wins]), types,
        np.concatenate([w.passage for w in wins]), np.concatenate([w.context for w in wins]),
        np.concatenate([w.char_start for w in wins]), np.concatenate([w.char_end for w in wins]),
    )


def _empty(max_length: int) -> Windows:
    z = np.zeros((0, max_length), dtype=np.int64)
    return Windows(z, z.copy(), None, np.zeros(0, dtype=np.int64), z.astype(bool), z.copy(), z.copy())


def token_span(win: Windows, w: int, start_char: int, end_char: int) -> tuple[int, int] | None:
    """Token positions of the characters ``[start_char, end_char)`` in window ``w``, if it holds them whole."""
    ctx = np.flatnonzero(win.context[w])
    if ctx.size == 0:
        return None
    cs, ce = win.char_start[w, ctx], win.char_end[w, ctx]
    if cs[0] > start_char or ce[-1] < end_char:
        return None
    starts = ctx[(cs <= start_char) & (ce > start_char)]
    ends = ctx[(cs < end_char) & (ce >= end_char)]
    if starts.size == 0 or ends.size == 0:
        # the answer begins or ends inside whitespace the tokenizer dropped: snap inwards
        starts = ctx[cs >= start_char][:1]
        ends = ctx[ce <= end_char][-1:]
        if starts.size == 0 or ends.size == 0 or ends[0] < starts[0]:
            return None
    return int(starts[0]), int(ends[-1])
