"""SQuAD v1.1 JSON (``{"version", "data": [{"title", "paragraphs": [{"context", "qas"}]}]}``).

One document per article: id = the title as written (``Super_Bowl_50``, the
key SQuAD questions refer to), title with underscores shown as spaces, and
every context paragraph in the lead, in order. ``keep_paragraphs`` is set so
that each context becomes its own passage(s): SQuAD answers are spans of one
context, and a passage straddling two contexts would blur which one answered.
Contexts are kept exactly as written (no whitespace normalization) so that
``answer_start`` offsets still point into them; questions are not read here.

The file is one JSON value, so it is loaded whole (SQuAD files are a few MB);
documents are still yielded one at a time. A malformed article is reported
through ``on_bad`` as ``article i`` (0-based, as in ``data[i]``).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from hiera.corpus.readers.base import OnBad, Record, raise_bad, read_utf8
from hiera.corpus.tree import Document
from hiera.errors import BadInputError, BadRecordError
from hiera.io import loads_json

SOURCE = "squad"


def load_squad_articles(path: Path) -> list:
    """The ``data`` list of a SQuAD JSON file, with one-line errors for anything else.

    Shared with the SQuAD question loader, which walks the same articles.
    """
    try:
        data = loads_json(read_utf8(path))
    except json.JSONDecodeError as e:
        raise BadInputError(f"{path}: not valid JSON: {e}") from None
    articles = data.get("data") if isinstance(data, dict) else None
    if not isinstance(articles, list):
        raise BadInputError(f"{path}: not a SQuAD file: expected an object with a 'data' list")
    return articles


def read_squad(path: Path, on_bad: OnBad = raise_bad) -> Iterator[Record]:
    """Yield one document per SQuAD article."""
    path = Path(path)
    articles = load_squad_articles(path)
    for i, article in enumerate(articles):
        try:
            doc = article_document(article)
        except ValueError as e:
            on_bad(BadRecordError(str(path), f"article {i}", str(e)))
            continue
        yield doc


def article_document(article: Any) -> Document:
    """One SQuAD article as a document; shared with the question loader so ids and passages match."""
    if not isinstance(article, dict):
        raise ValueError("an article must be a JSON object")
    title = article.get("title")
    if not isinstance(title, str) or not title.strip():
        raise ValueError("an article needs a non-empty string 'title'")
    paragraphs = article.get("paragraphs")
    if not isinstance(paragraphs, list) or not paragraphs:
        raise ValueError(f"article {title!r}: 'paragraphs' must be a non-empty list")
    contexts: list[str] = []
    for j, para in enumerate(paragraphs):
        context = para.get("context") if isinstance(para, dict) else None
        if not isinstance(context, str) or not context.strip():
            raise ValueError(f"article {title!r}: paragraph {j} has no string 'context'")
        contexts.append(context)
    title = title.strip()
    return Document(
        id=title,
        title=" ".join(title.replace("_", " ").split()),
        lead=contexts,
        metadata={"source": SOURCE},
        keep_paragraphs=True,
    )
