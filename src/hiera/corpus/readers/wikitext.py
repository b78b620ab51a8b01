"""WikiText-2 / WikiText-103 raw files (``wiki.*.raw``).

The format keeps Wikipedia's section structure as spaced-out headings::

     = Title =              a new article
     = = Section = =        a level-1 section
     = = = Sub = = =        its child (one more ``=`` per level)

and every other non-blank line is one paragraph. The text is tokenized; the
``@-@``, ``@,@`` and ``@.@`` artefacts (split hyphens, thousands separators and
decimal points) are glued back so that "24 @,@ 000" searches as "24,000". The
remaining tokenization (spaces before punctuation) is left alone: undoing it
is guesswork and BM25 tokenizers ignore it anyway.

A line shaped like a title is not always one: formulas lose their markup in
WikiText, leaving lines such as `` = 1 rad / s and a nominal impedance k = ``.
A title line is therefore accepted only if it opens the file, follows a
heading, or shares a word with the line after it (an article's first sentence
names its subject); otherwise it is kept as a paragraph. On
``wiki.test.raw`` this gives exactly its 60 articles.

Document ids are slugs of the titles, made unique with ``-2``, ``-3``...
Articles with no text and sections with no text below them are dropped.
Text before the first title is reported through ``on_bad`` (``line N``).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

from hiera.corpus.readers.base import (
    OnBad,
    Record,
    UniqueIds,
    normalize_ws,
    prune_sections,
    raise_bad,
    slugify,
    utf8_lines,
)
from hiera.corpus.tree import Document, Section
from hiera.errors import BadRecordError

SOURCE = "wikitext"

_HEADING = re.compile(r"^(=(?: =)*) (.+?) \1$")
_ARTEFACTS = re.compile(r" @([-,.])@ ")
_WORD = re.compile(r"\w+")
_STOPWORDS = frozenset({"the", "and", "of", "for", "an", "in", "on", "at", "to", "by", "with", "from", "or"})


def read_wikitext(path: Path, on_bad: OnBad = raise_bad) -> Iterator[Record]:
    """Stream one document per `` = Title = `` article, line by line."""
    path = Path(path)
    ids = UniqueIds()
    doc: Document | None = None
    stack: list[tuple[int, Section]] = []  # (number of '=', section)
    prev_heading = True  # the start of the file counts as a boundary
    orphan_reported = False
    for lineno, text, nxt in _lookahead(utf8_lines(path)):
        heading = _HEADING.match(text)
        if heading:
            level = heading.group(1).count("=")
            title = normalize_ws(restore(heading.group(2)))
            if level == 1 and (doc is None or prev_heading or _names_subject(title, nxt)):
                if doc is not None and _has_text(doc):
                    yield doc
                doc = Document(id=ids(slugify(title)), title=title, metadata={"source": SOURCE})
                stack = []
                prev_heading = True
                continue
            if level > 1 and doc is not None:
                while stack and stack[-1][0] >= level:
                    stack.pop()
                section = Section(title=title, level=len(stack) + 1)
                (stack[-1][1].children if stack else doc.sections).append(section)
                stack.append((level, section))
                prev_heading = True
                continue
        prev_heading = False
        if doc is None:
            if not orphan_reported:
                orphan_reported = True
                on_bad(
                    BadRecordError(str(path), f"line {lineno}", "text before the first ' = Title = ' line")
                )
            continue
        para = normalize_ws(restore(text))
        (stack[-1][1].paragraphs if stack else doc.lead).append(para)
    if doc is not None and _has_text(doc):
        yield doc


def restore(text: str) -> str:
    """Undo WikiText's ``@-@`` / ``@,@`` / ``@.@`` tokenization."""
    return _ARTEFACTS.sub(r"\1", text)


def _lookahead(lines: Iterator[tuple[int, str]]) -> Iterator[tuple[int, str, str | None]]:
    """Non-blank stripped lines, each with the next non-blank line (or None)."""
    pending: tuple[int, str] | None = None
    for lineno, raw in lines:
        text = raw.strip()
        if not text:
            continue
        if pending is not None:
            yield pending[0], pending[1], text
        pending = (lineno, text)
    if pending is not None:
        yield pending[0], pending[1], None


def _names_subject(title: str, next_line: str | None) -> bool:
    """Does the line after a title-shaped line mention the title (prefixes count)?"""
    if next_line is None:
        return False
    words = [w for w in _WORD.findall(title.lower()) if len(w) > 1 and w not in _STOPWORDS]
    following = set(_WORD.findall(restore(next_line).lower()))
    return any(f.startswith(w) or (len(f) > 3 and w.startswith(f)) for w in words for f in following)


def _has_text(doc: Document) -> bool:
    doc.sections = prune_sections(doc.sections)
    return bool(doc.lead or doc.sections)

