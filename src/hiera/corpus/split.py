"""Cut a document's leaves into passages of at most ``max_words`` words.

Rules (DHR): never across sections; break at sentence ends where possible; a
sentence longer than the limit is cut at the limit; short blocks are kept
(DPR's splitter dropped them, losing answers in short sections). Splitting
works on whitespace tokens, so joining a leaf's passages gives back its text
modulo whitespace.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from hiera.corpus.tree import Document, Passage, PassageRules, passage_id

# A token ends a sentence when it ends in . ! ? (optionally followed by closing
# quotes/brackets). Abbreviation handling is deliberately simple: a wrong break
# only moves a passage boundary, it never loses text.
_SENT_END = re.compile(r"[.!?][\"'”’)\]]*$")


def sentences(tokens: list[str]) -> Iterator[list[str]]:
    """Group whitespace tokens into sentences."""
    cur: list[str] = []
    for tok in tokens:
        cur.append(tok)
        if _SENT_END.search(tok):
            yield cur
            cur = []
    if cur:
        yield cur


def split_words(text: str, max_words: int) -> list[str]:
    """Pack whole sentences greedily into blocks of at most ``max_words`` words."""
    if max_words < 1:
        raise ValueError("max_words must be >= 1")
    blocks: list[list[str]] = []
    cur: list[str] = []
    for sent in sentences(text.split()):
        if len(sent) > max_words:
            if cur:
                blocks.append(cur)
                cur = []
            for i in range(0, len(sent), max_words):
                piece = sent[i : i + max_words]
                if len(piece) == max_words:
                    blocks.append(piece)
                else:
                    cur = piece
        elif len(cur) + len(sent) <= max_words:
            cur.extend(sent)
        else:
            blocks.append(cur)
            cur = list(sent)
    if cur:
        blocks.append(cur)
    return [" ".join(b) for b in blocks]


def split_document(doc: Document, rules: PassageRules | None = None) -> list[Passage]:
    """All passages of ``doc`` in document order, ids ``{doc_id}#{order}``."""
    rules = rules or PassageRules()
    out: list[Passage] = []
    for path, paragraphs in doc.leaves():
        texts = [p for p in paragraphs if p.strip()]
        if not texts:
            continue
        blocks: list[str] = []
        if doc.keep_paragraphs:
            for p in texts:
                blocks.extend(split_words(p, rules.max_words))
        else:
            blocks = split_words(" ".join(texts), rules.max_words)
        for b in blocks:
            order = len(out)
            out.append(
                Passage(
                    id=passage_id(doc.id, order),
                    doc_id=doc.id,
                    order=order,
                    section_path=path,
                    text=b,
                    doc_title=doc.title,
                )
            )
    return out
