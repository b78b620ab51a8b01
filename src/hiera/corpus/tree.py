"""The structured document ("title tree") and the passages cut from it.

A document is a tree: the root is the document title, inner nodes are section
titles and each node's own paragraphs form one leaf of text. The lead (text
before the first heading) is the root's leaf. Every title and every text
appears exactly once, so passages can be cut per leaf without ever crossing a
section boundary, and each passage knows its section path.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Section:
    """One heading with its own paragraphs and its sub-sections."""

    title: str
    level: int = 1
    paragraphs: list[str] = field(default_factory=list)
    children: list[Section] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "title": self.title,
            "level": self.level,
            "paragraphs": list(self.paragraphs),
            "children": [c.to_dict() for c in self.children],
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any], level: int = 1) -> Section:
        if not isinstance(data, dict) or not isinstance(data.get("title"), str):
            raise ValueError("a section needs a string 'title'")
        paragraphs = _strings(data, "paragraphs", f"section {data['title']!r}: ")
        children = data.get("children", [])
        if not isinstance(children, list):
            raise ValueError(f"section {data['title']!r}: 'children' must be a list")
        lvl = data.get("level", level)
        if isinstance(lvl, bool) or not isinstance(lvl, int) or lvl < 1:
            raise ValueError(f"section {data['title']!r}: 'level' must be a whole number >= 1, not {lvl!r}")
        return cls(
            title=data["title"],
            level=lvl,
            paragraphs=paragraphs,
            children=[cls.from_dict(c, lvl + 1) for c in children],
        )


@dataclass
class Document:
    """A titled document with a lead and nested sections.

    ``keep_paragraphs`` asks the splitter to treat each paragraph as its own
    text block (SQuAD: answer spans must map to exactly one passage).
    """

    id: str
    title: str
    lead: list[str] = field(default_factory=list)
    sections: list[Section] = field(default_factory=list)
    categories: list[str] = field(default_factory=list)
    links: list[str] = field(default_factory=list)
    aliases: list[str] = field(default_factory=list)
    metadata: dict[str, Any] = field(default_factory=dict)
    keep_paragraphs: bool = False

    def leaves(self) -> Iterator[tuple[tuple[str, ...], list[str]]]:
        """Yield ``(section_path, paragraphs)`` for every node, pre-order.

        The root's leaf (the lead) has the empty path. Nodes without text
        yield an empty paragraph list so callers can see the full shape.
        """
        yield (), self.lead

        def walk(sections: list[Section], path: tuple[str, ...]) -> Iterator[tuple[tuple[str, ...], list[str]]]:
            for s in sections:
                p = (*path, s.title)
                yield p, s.paragraphs
                yield from walk(s.children, p)

        yield from walk(self.sections, ())

    def toc(self) -> list[tuple[int, str]]:
        """Pre-order ``(depth, title)`` over section titles, root excluded."""
        out: list[tuple[int, str]] = []

        def walk(sections: list[Section], depth: int) -> None:
            for s in sections:
                out.append((depth, s.title))
                walk(s.children, depth + 1)

        walk(self.sections, 1)
        return out

    def section_count(self) -> int:
        return len(self.toc())

    def text(self) -> str:
        """All text of the document (titles excluded), for full-text indexes."""
        return "\n".join(p for _, paras in self.leaves() for p in paras)

    def summary(self, lead_words: int = 128, toc_sep: str = "; ") -> str:
        """Title + lead + linearized table of contents (DHR's document text).

        The lead is cut to ``lead_words`` words so that the table of contents
        still fits in a 256-token encoder window.
        """
        lead_tokens = " ".join(self.lead).split()
        lead = " ".join(lead_tokens[:lead_words])
        parts = [self.title]
        if lead:
            parts.append(lead)
        toc = [t for _, t in self.toc()]
        if toc:
            parts.append(toc_sep.join(toc))
        return "\n".join(parts)

    def to_dict(self) -> dict[str, Any]:
        """The hiera-jsonl record (see docs/FORMATS.md)."""
        return {
            "id": self.id,
            "title": self.title,
            "lead": list(self.lead),
            "sections": [s.to_dict() for s in self.sections],
            "categories": list(self.categories),
            "links": list(self.links),
            "aliases": list(self.aliases),
            "metadata": dict(self.metadata),
            "keep_paragraphs": self.keep_paragraphs,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Document:
        """Inverse of :meth:`to_dict`; raises ``ValueError`` on a bad shape."""
        if not isinstance(data, dict):
            raise ValueError("a document must be a JSON object")
        doc_id, title = data.get("id"), data.get("title")
        if not isinstance(doc_id, str | int) or str(doc_id).strip() == "":
            raise ValueError("a document needs a non-empty 'id'")
        if not isinstance(title, str) or not title.strip():
            raise ValueError("a document needs a non-empty string 'title'")
        lead = _strings(data, "lead")
        sections = data.get("sections", [])
        if not isinstance(sections, list):
            raise ValueError("'sections' must be a list")
        meta = data.get("metadata", {})
        if not isinstance(meta, dict):
            raise ValueError("'metadata' must be an object")
        return cls(
            id=str(doc_id),
            title=title.strip(),
            lead=lead,
            sections=[Section.from_dict(s) for s in sections],
            categories=_strings(data, "categories"),
            links=_strings(data, "links"),
            aliases=_strings(data, "aliases"),
            metadata=meta,
            keep_paragraphs=bool(data.get("keep_paragraphs", False)),
        )


def _strings(data: dict[str, Any], key: str, where: str = "") -> list[str]:
    """A list-of-strings field, where one string stands for a list of one (``"lead": "text"``); ``None`` or
    absence is an empty list. Anything else is refused rather than coerced: ``str()`` of a string field would
    make one category per character."""
    value = data.get(key)
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ValueError(f"{where}{key!r} must be a string or a list of strings")
    return list(value)


@dataclass(frozen=True)
class PassageRules:
    """How documents become passages; recorded in every manifest."""

    max_words: int = 100
    title_sep: str = ", "
    summary_lead_words: int = 128

    def to_dict(self) -> dict[str, Any]:
        return {"max_words": self.max_words, "title_sep": self.title_sep, "summary_lead_words": self.summary_lead_words}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PassageRules:
        return cls(
            max_words=int(data.get("max_words", 100)),
            title_sep=str(data.get("title_sep", ", ")),
            summary_lead_words=int(data.get("summary_lead_words", 128)),
        )


@dataclass(frozen=True)
class Passage:
    """A block of at most ``max_words`` words from one leaf of one document."""

    id: str
    doc_id: str
    order: int
    section_path: tuple[str, ...]
    text: str
    doc_title: str

    def title(self, sep: str = ", ") -> str:
        """Document title + section path: what the paper prefixes to passages."""
        return sep.join((self.doc_title, *self.section_path))

    def titled_text(self, sep: str = ", ") -> str:
        """Title first, so encoder truncation never cuts it."""
        return f"{self.title(sep)}\n{self.text}"

    def breadcrumb(self) -> str:
        return " › ".join((self.doc_title, *self.section_path))


def passage_id(doc_id: str, order: int) -> str:
    """Stable passage id: the same document and rules give the same ids."""
    return f"{doc_id}#{order}"
