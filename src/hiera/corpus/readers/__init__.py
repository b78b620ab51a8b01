"""Source readers, one module per family, looked up by format name.

Modules are imported on first use so that reading JSON lines never imports
mwparserfromhell.
"""

from __future__ import annotations

import importlib

from hiera.corpus.readers.base import OnBad, Reader, Record, Redirect, raise_bad
from hiera.errors import UnknownFormatError

# format name -> (module, function)
FORMATS: dict[str, tuple[str, str]] = {
    "wikipedia-xml": ("hiera.corpus.readers.wikipedia_xml", "read_wikipedia_xml"),
    "wikitext": ("hiera.corpus.readers.wikitext", "read_wikitext"),
    "squad": ("hiera.corpus.readers.squad", "read_squad"),
    "beir": ("hiera.corpus.readers.jsonl", "read_beir"),
    "jsonl": ("hiera.corpus.readers.jsonl", "read_jsonl"),
    "hotpotqa-pool": ("hiera.corpus.readers.jsonl", "read_jsonl"),
    "hiera-jsonl": ("hiera.corpus.readers.jsonl", "read_hiera_jsonl"),
    "ovos-summaries": ("hiera.corpus.readers.ovos", "read_ovos_summaries"),
    "markdown": ("hiera.corpus.readers.markdown", "read_markdown"),
    "quest-documents": ("hiera.corpus.readers.quest", "read_quest_documents"),
}


def get_reader(fmt: str) -> Reader:
    """The reader for ``fmt``; an unknown name lists the known ones."""
    try:
        module, func = FORMATS[fmt]
    except KeyError:
        raise UnknownFormatError(f"unknown format {fmt!r}; known formats: {', '.join(sorted(FORMATS))}") from None
    return getattr(importlib.import_module(module), func)


__all__ = ["FORMATS", "OnBad", "Reader", "Record", "Redirect", "get_reader", "raise_bad"]
