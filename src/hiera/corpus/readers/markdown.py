"""Markdown notes: one ``.md`` file, or a folder of them (recursively).

Files are read in sorted relative-path order so that ingests are
reproducible; files and folders whose name starts with a dot (``.github``,
``.obsidian``) are skipped as tooling, not content. Each file is one document:

* id = path relative to the folder, without ``.md`` (``guides/setup``);
* title = a ``# H1`` (or an ``===``-underlined line) that opens the file, else the front matter's ``title:``
  (where Hugo and Jekyll keep it), else the file stem;
* ``##`` is a level-1 section, ``###`` its child, and so on; a later ``#``
  heading is a level-1 section too; setext headings (``===``/``---``
  underlines) count as ``#``/``##``;
* text before the first section is the lead; paragraphs are blank-line
  separated blocks with whitespace normalized;
* YAML front matter (a ``---`` block at the top) but for its title, fenced code blocks
  (```` ``` ```` / ``~~~``), HTML comments and link definitions are skipped,
  because code and metadata match queries on identifiers rather than meaning;
* inline markup is reduced to its text (links and emphasis keep their words,
  images are dropped) for the same reason.

A file with no text left after that is skipped. A file that is not UTF-8 is
reported through ``on_bad`` with location ``file``; a single empty or missing
file, or a folder without ``.md`` files, raises :class:`BadInputError`.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

from hiera.corpus.readers.base import OnBad, Record, check_file, normalize_ws, prune_sections, raise_bad
from hiera.corpus.tree import Document, Section
from hiera.errors import BadInputError, BadRecordError

SOURCE = "markdown"

# Every pattern runs in linear time on hostile input (megabyte lines of "[[[[", "*a *a", "<a<a",
# spaces): a span stops at the next delimiter instead of backtracking over the rest of the line.
_ATX = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*))?$")
_SETEXT = re.compile(r"^ {0,3}(=+|-+)[ \t]*$")
_FRONT_TITLE = re.compile(r"^title:[ \t]*(.+)$")
_FENCE_OPEN = re.compile(r"^ {0,3}(`{3,}|~{3,})(.*)$")
_LINK_DEF = re.compile(r"^ {0,3}\[[^\[\]]+\]:\s*\S")
_LIST_OR_QUOTE = re.compile(r"^\s*(?:>\s?)*\s*(?:(?:[-*+]|\d{1,9}[.)])\s+)?")
_IMAGE = re.compile(r"!\[[^\[\]]*\]\([^()]*\)|!\[[^\[\]]*\]\[[^\[\]]*\]")
_LINK = re.compile(r"\[([^\[\]]+)\]\([^()]*\)|\[([^\[\]]+)\]\[[^\[\]]*\]")
_AUTOLINK = re.compile(r"<((?:https?|ftp|mailto):[^<>\s]+)>")
_HTML_TAG = re.compile(r"</?[A-Za-z][^<>\n]*>")
_STRONG = re.compile(r"\*\*(?=[^*\s])([^*]+?)(?<=\S)\*\*|__(?=[^_\s])([^_]+?)(?<=\S)__")
_EM_STAR = re.compile(r"\*(?=[^*\s])([^*]+?)(?<=\S)\*")
_EM_UNDERSCORE = re.compile(r"(?<!\w)_(?=[^_\s])([^_]+?)(?<=\S)_(?!\w)")
_CODE_SPAN = re.compile(r"(?<!`)(`++)([^`]+?)\1(?!`)")
_STRIKE = re.compile(r"~~([^~]+?)~~")


def read_markdown(path: Path, on_bad: OnBad = raise_bad) -> Iterator[Record]:
    """Yield one document per markdown file."""
    path = Path(path)
    check_file(path)
    if path.is_dir():
        root = path
        files = sorted(
            (p for p in path.rglob("*.md") if p.is_file() and not _hidden(p.relative_to(root))),
            key=lambda p: p.relative_to(root).as_posix(),
        )
        if not files:
            raise BadInputError(f"{path}: no .md files in this folder")
    else:
        root, files = path.parent, [path]
    for file in files:
        rel = file.relative_to(root).with_suffix("").as_posix()
        try:
            text = file.read_bytes().decode("utf-8-sig")
        except UnicodeDecodeError as e:
            on_bad(BadRecordError(str(file), "file", f"not valid UTF-8 at byte {e.start}"))
            continue
        doc = parse_markdown(rel, file.stem, text)
        if doc is not None:
            doc.metadata["path"] = file.relative_to(root).as_posix()
            yield doc


def _hidden(rel: Path) -> bool:
    return any(part.startswith(".") for part in rel.parts)


def parse_markdown(doc_id: str, default_title: str, text: str) -> Document | None:
    """Build the title tree of one markdown text; ``None`` if it has no text."""
    lines, front_title = _strip_front_matter(_strip_comments(text).splitlines())
    title: str | None = None
    lead: list[str] = []
    sections: list[Section] = []
    stack: list[tuple[int, Section]] = []  # (number of '#', section)
    block: list[str] = []
    seen_content = False
    block_opens_file = False  # the block being read is the file's first content (a setext title's text)

    def target() -> list[str]:
        return stack[-1][1].paragraphs if stack else lead

    def flush() -> None:
        para = _inline(" ".join(block))
        block.clear()
        if any(c.isalnum() for c in para):
            target().append(para)

    def heading(level: int, raw: str, opens_file: bool) -> None:
        nonlocal title, seen_content
        head = _inline(raw)
        if not head:
            return
        if level == 1 and title is None and opens_file:
            title = head
            seen_content = True
            return
        seen_content = True
        while stack and stack[-1][0] >= level:
            stack.pop()
        section = Section(title=head, level=len(stack) + 1)
        (stack[-1][1].children if stack else sections).append(section)
        stack.append((level, section))

    fence: str | None = None
    for line in lines:
        if fence is not None:
            stripped = line.strip()
            if stripped.startswith(fence[0]) and set(stripped) == {fence[0]} and len(stripped) >= len(fence):
                fence = None
            continue
        opened = _FENCE_OPEN.match(line)
        if opened and not (opened.group(1)[0] == "`" and "`" in opened.group(2)):
            flush()
            fence = opened.group(1)
            continue
        atx = _ATX.match(line)
        if atx:
            flush()
            heading(len(atx.group(1)), _strip_closing(atx.group(2) or ""), not seen_content)
            continue
        setext = _SETEXT.match(line)
        if setext and block:
            raw = " ".join(block)
            block.clear()
            heading(1 if setext.group(1)[0] == "=" else 2, raw, block_opens_file)
            continue
        if not line.strip():
            flush()
            continue
        if setext or _LINK_DEF.match(line):
            continue  # a thematic break or a link definition: no prose
        if not block:
            block_opens_file = not seen_content
        block.append(_LIST_OR_QUOTE.sub("", line, count=1).replace("|", " "))
        seen_content = True
    flush()
    sections = prune_sections(sections)
    if not lead and not sections:
        return None
    return Document(
        id=doc_id,
        title=title or front_title or default_title,
        lead=lead,
        sections=sections,
        metadata={"source": SOURCE},
    )


def _strip_comments(text: str) -> str:
    """Drop ``<!-- … -->`` (an unclosed one stays as text), in one pass."""
    out: list[str] = []
    i = 0
    while True:
        start = text.find("<!--", i)
        end = text.find("-->", start + 4) if start >= 0 else -1
        if end < 0:
            out.append(text[i:])
            return "".join(out)
        out.append(text[i:start])
        i = end + 3


def _strip_closing(content: str) -> str:
    """An ATX heading's text without trailing blanks and its optional closing ``#`` run."""
    content = content.rstrip(" \t")
    bare = content.rstrip("#")
    if bare != content and (not bare or bare[-1] in " \t"):
        content = bare.rstrip(" \t")
    return content


def _strip_front_matter(lines: list[str]) -> tuple[list[str], str | None]:
    """The lines after a YAML front matter block, and its ``title:`` (Hugo, Jekyll and Obsidian keep it there)."""
    if not lines or lines[0].strip() != "---":
        return lines, None
    for i in range(1, len(lines)):
        if lines[i].strip() in ("---", "..."):
            title = next((m.group(1) for m in map(_FRONT_TITLE.match, lines[1:i]) if m), None)
            return lines[i + 1 :], (_inline(title.strip().strip("\"'")) or None) if title else None
    return lines, None  # never closed: it was a thematic break, not front matter


def _inline(text: str) -> str:
    """Reduce inline markdown to the words a reader sees."""
    text = _IMAGE.sub("", text)
    text = _LINK.sub(lambda m: m.group(1) or m.group(2), text)
    text = _AUTOLINK.sub(r"\1", text)
    text = _CODE_SPAN.sub(lambda m: m.group(2).strip(), text)
    text = _HTML_TAG.sub("", text)
    text = _STRONG.sub(lambda m: m.group(1) or m.group(2), text)
    text = _EM_STAR.sub(r"\1", text)
    text = _EM_UNDERSCORE.sub(r"\1", text)
    text = _STRONG.sub(lambda m: m.group(1) or m.group(2), text)  # **bold *with* emphasis** inside
    text = _STRIKE.sub(r"\1", text)
    return normalize_ws(text)

