"""One document per article across sources: title keys, and a merged document composed from its parts.

Two sources often hold the same article (the demo's Wikipedia dump excerpt and
its ~10k lead summaries share 46 titles): ingested side by side they are two
documents, and a question about Azerbaijan lists *Azerbaijan* twice. The store
(:class:`hiera.corpus.store.CorpusStore`) detects such a duplicate by its
title key (below) or through a stored redirect, and by default merges it into
the document that was there first; this module holds what needs no SQL.

A merged document is *composed* from its parts, the first source's document
first, so that re-ingesting any one part recomposes the whole:

* the first part is kept as it is (its id, title, lead and sections), so its
  passage ids do not change when another source is merged into it;
* each later part adds one trailing top-level section, ``From <source>``,
  holding its lead paragraphs and (nested below) its own sections, minus the
  paragraphs whose text the document already holds (most of a paragraph's word
  trigrams already present, :data:`REDUNDANT`): two revisions of the same
  lead are not indexed twice, what only the later source says is kept;
* categories, links and aliases are unions; ``metadata["sources"]`` lists
  every part's id, title and origin with how many paragraphs it kept
  (provenance).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hiera.corpus.tree import Document, Section

DUPLICATE_MODES = ("merge", "keep", "skip")
REDUNDANT = 0.5  # a paragraph whose word trigrams are at least this share already in the document adds nothing

_WORD = re.compile(r"\w+")


def title_key(title: str) -> str:
    """A title as Wikipedia compares titles: NFC, ``_`` = space, whitespace collapsed, first letter upper-cased.

    Only the first letter's case is folded ("Red dwarf" the star and "Red
    Dwarf" the sitcom stay apart), so two titles with the same key name the
    same article in any source that follows Wikipedia's titles (SQuAD writes
    ``Nikola_Tesla``, the summaries ``Nikola Tesla``).
    """
    t = " ".join(unicodedata.normalize("NFC", title).replace("_", " ").split())
    return t[:1].upper() + t[1:]


@dataclass(frozen=True)
class Part:
    """One source's document inside a merged one; ``origin`` says where it was read (format and file)."""

    id: str
    origin: str
    doc: Document


def origin_label(doc: Document, origin: str) -> str:
    """What a part's section is called after: its reader's ``source`` tag, else the file it came from."""
    src = doc.metadata.get("source") if isinstance(doc.metadata, dict) else None
    if isinstance(src, str) and src.strip():
        return src.strip()
    name = Path(origin.split(", ")[0]).name if origin else ""
    return name or doc.id


def _trigrams(text: str) -> set[tuple[str, ...]]:
    words = [w.lower() for w in _WORD.findall(text)]
    if len(words) < 3:
        return {tuple(words)} if words else set()
    return {tuple(words[i : i + 3]) for i in range(len(words) - 2)}


class _Seen:
    """The word trigrams of every paragraph the composed document holds so far."""

    def __init__(self, paragraphs: Iterable[str]) -> None:
        self.grams: set[tuple[str, ...]] = set()
        for p in paragraphs:
            self.grams |= _trigrams(p)

    def novel(self, paragraph: str) -> bool:
        grams = _trigrams(paragraph)
        if not grams:
            return False
        if len(grams & self.grams) / len(grams) >= REDUNDANT:
            return False
        self.grams |= grams
        return True


def _sections(sections: Sequence[Section], seen: _Seen, level: int) -> tuple[list[Section], int, int]:
    """``sections`` copied one level deeper with redundant paragraphs dropped; empty ones go. (kept, dropped)."""
    out: list[Section] = []
    kept = dropped = 0
    for s in sections:
        paras = [p for p in s.paragraphs if seen.novel(p)]
        kept += len(paras)
        dropped += len(s.paragraphs) - len(paras)
        children, k, d = _sections(s.children, seen, level + 1)
        kept += k
        dropped += d
        if paras or children:
            out.append(Section(title=s.title, level=level, paragraphs=paras, children=children))
    return out, kept, dropped


def _count(sections: Sequence[Section]) -> int:
    return sum(len(s.paragraphs) + _count(s.children) for s in sections)


def _union(*lists: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(x for xs in lists for x in xs))


def provenance(part: Part, kept: int, dropped: int) -> dict[str, Any]:
    return {"id": part.id, "title": part.doc.title, "origin": part.origin,
            "source": origin_label(part.doc, part.origin), "paragraphs_kept": kept, "paragraphs_dropped": dropped}


def compose(parts: Sequence[Part]) -> Document:
    """The merged document of ``parts`` (first part first): its id and title, every source's text once."""
    if not parts:
        raise ValueError("a merged document needs at least one part")
    first = Document.from_dict(parts[0].doc.to_dict())  # a copy: the parts stay as they were read
    seen = _Seen(p for _, paras in first.leaves() for p in paras)
    meta = {k: v for k, v in first.metadata.items() if k != "sources"}
    n_first = len(first.lead) + _count(first.sections)
    sources = [provenance(parts[0], n_first, 0)]
    merged = Document(
        id=parts[0].id, title=first.title, lead=list(first.lead), sections=list(first.sections),
        categories=list(first.categories), links=list(first.links), aliases=list(first.aliases),
        metadata=meta, keep_paragraphs=first.keep_paragraphs,
    )
    for part in parts[1:]:
        d = part.doc
        lead = [p for p in d.lead if seen.novel(p)]
        children, kept, dropped = _sections(d.sections, seen, 2)
        kept += len(lead)
        dropped += len(d.lead) - len(lead)
        if lead or children:
            merged.sections.append(
                Section(title=f"From {origin_label(d, part.origin)}", level=1, paragraphs=lead, children=children)
            )
        merged.categories = _union(merged.categories, d.categories)
        merged.links = _union(merged.links, d.links)
        merged.aliases = _union(merged.aliases, d.aliases, [d.title] if d.title != merged.title else [])
        merged.keep_paragraphs = merged.keep_paragraphs or d.keep_paragraphs
        sources.append(provenance(part, kept, dropped))
    merged.metadata["sources"] = sources
    return merged
