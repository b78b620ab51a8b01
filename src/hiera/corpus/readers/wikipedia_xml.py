"""MediaWiki XML dumps (``pages-articles*.xml``, plain, ``.bz2`` or ``.gz``).

The dump is streamed with ``iterparse`` and every ``<page>`` is cleared as
soon as it is read, so memory stays flat however large the dump is. The export
namespace (``export-0.10``, ``0.11``...) is taken from the root element rather
than hard-coded, and namespace names (``File``, ``Category``, their localized
forms) from ``<siteinfo>``.

What becomes a document:

* only main-namespace pages (``<ns>0</ns>``);
* redirects (a ``<redirect title=..>`` element or text starting ``#REDIRECT``)
  become :class:`Redirect` records, never documents;
* disambiguation pages (a ``{{disambiguation}}``, ``{{disambig}}``,
  ``{{dab}}``, ``{{geodis}}``, ``{{hndis}}`` or any ``{{...disambiguation...}}``
  template other than the inline ``{{disambiguation needed}}``, or a title ending
  "(disambiguation)") are skipped: they are lists of pointers that would only
  add near-duplicate noise to a retrieval index;
* pages left without any prose after cleaning (pure template pages) are skipped.

Cleaning, done on the parse tree of ``mwparserfromhell`` rather than with
regexes so that nesting (templates inside refs inside links) cannot leak:
templates (infoboxes included), tables, ``<ref>``, ``<math>``, galleries and
comments are dropped; file/image links go with their captions; category links
go to ``Document.categories``; interlanguage links are dropped; wikilinks become
their display text and their targets go to ``Document.links`` (deduplicated, in
order); external links become their label (bare URLs are dropped); bold/italic
and other inline HTML keep only their text.

Sections: ``==H==`` is a level-1 section, ``===H===`` its child, and so on
(a skipped level nests under the nearest shallower heading); text before the
first heading is the lead. Paragraphs are blank-line-separated blocks with
whitespace normalized; blocks without a single letter or digit (markup
leftovers such as ``----`` or an emptied list) are dropped, and so are
sections that end up with no text and no non-empty sub-section.

Boilerplate sections ("References", "External links", "See also", "Further
reading", "Notes", "Bibliography", "Sources", "Citations", "Footnotes"): their
list items (citations, link lists) are dropped because they are not prose and
would match queries on names and titles alone; whatever prose remains in them
is kept, and the section disappears if nothing remains.

Errors: a truncated or corrupt file (bz2/gzip stream ending early, broken XML)
raises :class:`BadInputError` with the number of pages read so far: it cannot
be skipped because nothing after the break can be trusted. A page whose
wikitext cannot be processed is reported through ``on_bad`` as
``page 'Title'``.
"""

from __future__ import annotations

import bz2
import gzip
import html
import importlib.util
import re
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

import mwparserfromhell
from mwparserfromhell.nodes import (
    Argument,
    Comment,
    ExternalLink,
    Heading,
    HTMLEntity,
    Tag,
    Template,
    Text,
    Wikilink,
)
from mwparserfromhell.wikicode import Wikicode

from hiera.corpus.readers.base import (
    OnBad,
    Record,
    Redirect,
    check_file,
    normalize_ws,
    prune_sections,
    raise_bad,
)
from hiera.corpus.tree import Document, Section
from hiera.errors import BadInputError, BadRecordError

SOURCE = "wikipedia-xml"

# Section titles whose list items are references or link lists, not prose.
BOILERPLATE_SECTIONS = frozenset(
    {
        "references",
        "external links",
        "see also",
        "further reading",
        "notes",
        "bibliography",
        "sources",
        "citations",
        "footnotes",
        "notes and references",
        "references and notes",
    }
)

# Tags whose content is not prose (or is markup that would pollute passages).
_DROP_TAGS = frozenset(
    {
        "ref",
        "references",
        "table",
        "math",
        "chem",
        "ce",
        "gallery",
        "imagemap",
        "timeline",
        "score",
        "graph",
        "mapframe",
        "maplink",
        "templatedata",
        "templatestyles",
        "syntaxhighlight",
        "source",
        "hiero",
        "inputbox",
        "categorytree",
        "noinclude",
        "style",
        "script",
    }
)
# List markers (``*``, ``#``, ``:``, ``;``) become this sentinel so that list
# lines can still be told apart after rendering.
_LIST_MARK = "\x01"
_LIST_TAGS = frozenset({"li", "dt", "dd"})
_BREAK_TAGS = frozenset({"br", "hr", "p", "div"})

_DEFAULT_NAMESPACES = {
    "media": -2,
    "special": -1,
    "talk": 1,
    "user": 2,
    "user talk": 3,
    "wikipedia": 4,
    "wikipedia talk": 5,
    "file": 6,
    "file talk": 7,
    "mediawiki": 8,
    "template": 10,
    "help": 12,
    "category": 14,
    "portal": 100,
    "draft": 118,
    "module": 828,
}
# Aliases MediaWiki accepts everywhere but siteinfo does not list.
_NAMESPACE_ALIASES = {"image": 6, "wp": 4, "project": 4, "cat": 14}
_FILE_NS = {6, -2}
_CATEGORY_NS = 14

_REDIRECT_TEXT = re.compile(r"^\s*#\s*redirect\s*:?\s*\[\[([^\]|]+)", re.IGNORECASE)
_INTERWIKI_PREFIX = re.compile(r"^[a-z][a-z0-9-]*$")
_LANGUAGE_PREFIX = re.compile(r"^(?:[a-z]{2,3}(?:-[a-z0-9]+)*|simple)$")
_BLOCKS = re.compile(r"\n[ \t]*\n")
_EMPTY_PARENS = re.compile(r"\(\s*[,;:]?\s*\)")
_PAREN_LEAD_PUNCT = re.compile(r"\(\s*[,;:]\s*")
_PAREN_TRAIL_PUNCT = re.compile(r"\s*[,;:]\s*\)")
_QUOTE_MARKUP = re.compile(r"'{2,}")
_SPACE_BEFORE_PUNCT = re.compile(r"\s+([,.;:!?])(?=\s|$)")
_DAB_NAMES = frozenset({"dab", "disambig", "disamb", "geodis", "hndis", "numberdis", "letter disambiguation"})


GENSIM_DUMP = "test/test_data/enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2"


def gensim_dump_path() -> Path:
    """The real Wikipedia dump excerpt shipped in the ``gensim`` wheel (found without importing gensim)."""
    try:
        spec = importlib.util.find_spec("gensim")
    except (ImportError, ValueError):
        spec = None
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    if not locations:
        raise BadInputError("package 'gensim' is not installed (pip install 'hiera[data]' or gensim)")
    path = Path(locations[0]) / GENSIM_DUMP
    if not path.is_file():
        raise BadInputError(f"{path}: the Wikipedia dump excerpt is missing from the installed gensim package")
    return path


def read_wikipedia_xml(path: Path, on_bad: OnBad = raise_bad) -> Iterator[Record]:
    """Stream documents and redirects out of a MediaWiki XML dump."""
    path = Path(path)
    check_file(path)
    pages = 0
    try:
        with _open(path) as fh:
            namespaces = dict(_DEFAULT_NAMESPACES)
            root: ET.Element | None = None
            xmlns = ""
            for event, elem in ET.iterparse(fh, events=("start", "end")):
                if event == "start":
                    if root is None:
                        root = elem
                        xmlns = elem.tag[: elem.tag.index("}") + 1] if elem.tag.startswith("{") else ""
                    continue
                name = elem.tag[len(xmlns) :] if elem.tag.startswith(xmlns) else elem.tag
                if name == "siteinfo":
                    namespaces.update(_siteinfo_namespaces(elem, xmlns))
                    elem.clear()
                elif name == "page":
                    pages += 1
                    yield from _page(path, elem, xmlns, pages, namespaces, on_bad)
                    # The root keeps a reference to every finished page; drop them.
                    elem.clear()
                    if root is not None:
                        root.clear()
    except (EOFError, OSError, ET.ParseError) as e:
        reason = normalize_ws(str(e)) or type(e).__name__
        raise BadInputError(f"{path}: truncated or corrupt dump: {reason} (after {pages} pages)") from None


def _open(path: Path) -> IO[bytes]:
    """Open by content, not by name: a renamed ``.bz2`` still reads."""
    with open(path, "rb") as fh:
        magic = fh.read(3)
    if magic == b"BZh":
        return bz2.open(path, "rb")
    if magic[:2] == b"\x1f\x8b":
        return gzip.open(path, "rb")
    return open(path, "rb")


def _siteinfo_namespaces(siteinfo: ET.Element, xmlns: str) -> dict[str, int]:
    out: dict[str, int] = {}
    for ns in siteinfo.iter(f"{xmlns}namespace"):
        key, name = ns.get("key"), (ns.text or "").strip()
        if key is not None and name and key.lstrip("-").isdigit():
            out[name.lower().replace("_", " ")] = int(key)
    return out


def _page(
    path: Path, page: ET.Element, xmlns: str, number: int, namespaces: dict[str, int], on_bad: OnBad
) -> Iterator[Record]:
    title = normalize_ws(page.findtext(f"{xmlns}title") or "")
    ns = (page.findtext(f"{xmlns}ns") or "0").strip()
    page_id = (page.findtext(f"{xmlns}id") or "").strip()
    if ns != "0":
        return
    if not title or not page_id:
        on_bad(BadRecordError(str(path), f"page {number}", "page without <title> or <id>"))
        return
    text = page.findtext(f"{xmlns}revision/{xmlns}text") or ""
    redirect = page.find(f"{xmlns}redirect")
    target = redirect.get("title") if redirect is not None else None
    if target is None:
        m = _REDIRECT_TEXT.match(text)
        target = m.group(1) if m else None
    if target is not None:
        target = _normalize_target(target)
        if target and target != title:
            yield Redirect(alias=title, target=target)
        return
    if title.endswith("(disambiguation)"):
        return
    try:
        doc = _convert(page_id, title, text, namespaces)
    except Exception as e:  # any parser failure is this page's fault, not the dump's
        on_bad(
            BadRecordError(str(path), f"page {title!r}", f"cannot parse wikitext: {type(e).__name__}: {e}")
        )
        return
    if doc is not None:
        yield doc


def _normalize_target(target: str) -> str:
    """Page title as MediaWiki stores it: no fragment, spaces, first letter upper."""
    target = normalize_ws(target.split("#", 1)[0].replace("_", " "))
    return target[:1].upper() + target[1:]


def _is_disambiguation(code: Wikicode) -> bool:
    for tpl in code.filter_templates(recursive=False):
        name = normalize_ws(str(tpl.name).replace("_", " ")).lower()
        name = name.removeprefix("template:")
        if "needed" in name:
            continue  # {{disambiguation needed}} tags an ambiguous link in an article
        if name in _DAB_NAMES or name.startswith("disambig") or "disambiguation" in name:
            return True
    return False


@dataclass
class _Render:
    """Per-page state while flattening the parse tree to text."""

    namespaces: dict[str, int]
    links: dict[str, None] = field(default_factory=dict)
    categories: dict[str, None] = field(default_factory=dict)


def _convert(page_id: str, title: str, text: str, namespaces: dict[str, int]) -> Document | None:
    # MediaWiki closes bold/italic at the end of the line; mwparserfromhell
    # lets an unbalanced '' swallow whole sections (headings included), so
    # quote runs are left as text here and deleted in _tidy.
    code = mwparserfromhell.parse(text, skip_style_tags=True)
    if _is_disambiguation(code):
        return None
    state = _Render(namespaces)
    # (heading level, heading title, rendered body) in document order.
    chunks: list[tuple[int, str, list[str]]] = [(0, "", [])]
    for node in code.nodes:
        if isinstance(node, Heading):
            heading: list[str] = []
            _render(node.title, heading, state)
            head_title = _tidy("".join(heading).replace(_LIST_MARK, ""))
            if head_title:
                chunks.append((node.level, head_title, []))
                continue
            # An empty heading (only a template) merges into the current section.
        _render_node(node, chunks[-1][2], state)

    lead = _paragraphs("".join(chunks[0][2]), boilerplate=False)
    sections: list[Section] = []
    stack: list[tuple[int, Section, bool]] = []  # (wiki level, section, inside boilerplate)
    for level, head_title, body in chunks[1:]:
        while stack and stack[-1][0] >= level:
            stack.pop()
        boiler = head_title.lower().rstrip(":") in BOILERPLATE_SECTIONS or bool(stack and stack[-1][2])
        section = Section(
            title=head_title, level=len(stack) + 1, paragraphs=_paragraphs("".join(body), boiler)
        )
        (stack[-1][1].children if stack else sections).append(section)
        stack.append((level, section, boiler))
    sections = prune_sections(sections)
    if not lead and not sections:
        return None
    return Document(
        id=page_id,
        title=title,
        lead=lead,
        sections=sections,
        categories=list(state.categories),
        links=list(state.links),
        metadata={"source": SOURCE},
    )



def _paragraphs(text: str, boilerplate: bool) -> list[str]:
    out: list[str] = []
    for block in _BLOCKS.split(text):
        lines: list[str] = []
        for line in block.split("\n"):
            stripped = line.strip()
            is_list = stripped.startswith(_LIST_MARK)
            stripped = stripped.replace(_LIST_MARK, " ")
            if boilerplate and is_list:
                continue
            if any(c.isalnum() for c in stripped):
                lines.append(stripped)
        para = _tidy(" ".join(lines))
        # In boilerplate sections a lone "Books:" / "Further reading:" line is
        # the label of a list we dropped, not prose.
        if boilerplate and para.endswith(":") and len(para.split()) <= 4:
            continue
        if any(c.isalnum() for c in para):
            out.append(para)
    return out


def _tidy(text: str) -> str:
    """Repair the holes that removed templates and refs leave in sentences."""
    # Entities the parser left as text (double-escaped in the source) go too.
    text = normalize_ws(html.unescape(_QUOTE_MARKUP.sub("", text)))
    text = _EMPTY_PARENS.sub("", text)
    text = _PAREN_LEAD_PUNCT.sub("(", text)
    text = _PAREN_TRAIL_PUNCT.sub(")", text)
    text = _SPACE_BEFORE_PUNCT.sub(r"\1", text)
    return normalize_ws(text)


def _render(code: Wikicode, out: list[str], state: _Render) -> None:
    for node in code.nodes:
        _render_node(node, out, state)


def _render_node(node: object, out: list[str], state: _Render) -> None:
    if isinstance(node, Text):
        out.append(str(node.value))
    elif isinstance(node, Wikilink):
        _render_link(node, out, state)
    elif isinstance(node, Tag):
        _render_tag(node, out, state)
    elif isinstance(node, HTMLEntity):
        value = node.normalize()
        out.append(" " if value.isspace() else value)
    elif isinstance(node, ExternalLink):
        if node.title is not None:
            _render(node.title, out, state)
    elif isinstance(node, Heading):
        # A heading nested inside a tag: keep its words, lose the structure.
        out.append("\n\n")
        _render(node.title, out, state)
        out.append("\n\n")
    elif isinstance(node, Template | Comment | Argument):
        return
    # Any other node kind carries no prose.


def _render_tag(tag: Tag, out: list[str], state: _Render) -> None:
    name = str(tag.tag).strip().lower()
    if name in _DROP_TAGS:
        return
    if name in _LIST_TAGS and tag.wiki_markup:
        out.append(_LIST_MARK)
        return
    if name in _BREAK_TAGS:
        out.append("\n\n" if name in ("hr", "p", "div") else " ")
    if name == "nowiki" and tag.contents is not None:
        out.append(str(tag.contents))
        return
    if tag.contents is not None:
        _render(tag.contents, out, state)
    if name in ("p", "div", "blockquote"):
        out.append("\n\n")


def _render_link(link: Wikilink, out: list[str], state: _Render) -> None:
    raw = str(link.title).strip()
    visible_colon = raw.startswith(":")
    target = raw.lstrip(":").strip()
    prefix, sep, rest = target.partition(":")
    ns = state.namespaces.get(prefix.strip().lower().replace("_", " "), 0) if sep else 0
    if not ns and sep:
        ns = _NAMESPACE_ALIASES.get(prefix.strip().lower(), 0)

    def show(default: str) -> None:
        if link.text is not None:
            _render(link.text, out, state)
        else:
            out.append(default)

    if ns in _FILE_NS and not visible_colon:
        return
    if ns == _CATEGORY_NS and not visible_colon:
        cat = _normalize_target(rest)
        if cat:
            state.categories[cat] = None
        return
    if ns:
        show(rest.strip())
        return
    if sep and _INTERWIKI_PREFIX.match(prefix.strip()):
        if _LANGUAGE_PREFIX.match(prefix.strip()) and not visible_colon and link.text is None:
            return  # interlanguage link: not part of the text
        show(rest.strip())
        return
    norm = _normalize_target(target)
    if norm:
        state.links[norm] = None
    show(target.split("#", 1)[0] if not target.startswith("#") else target[1:])
