"""A document as people and tools read it: the title tree with each section's passages, and its provenance.

One view for every surface that shows a document: ``/documents/{id}`` and the
web page's side panel (:mod:`hiera.serve`), and the ``get_document`` tool of
the MCP server (:mod:`hiera.integrations`).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from typing import Any

from hiera.corpus.store import CorpusStore
from hiera.corpus.tree import Document, Passage, Section

MAX_LINKS = 200


def _norm(text: str) -> str:
    return " ".join(text.split())


def document_view(store: CorpusStore, doc: Document) -> dict[str, Any]:
    """The title tree with each section's passages, as the web page's side panel shows it.

    Passages are stored in the order the splitter walked the tree (pre-order,
    lead first), so they are handed out to sections in that same walk. A
    passage must also be text of its section: two sibling sections with the
    same title share a section path, and only the text tells them apart.
    """
    queue: deque[Passage] = deque(p for _, p in store.iter_passages([doc.id]))

    def take(path: tuple[str, ...], paragraphs: Sequence[str]) -> list[dict[str, str]]:
        leaf = _norm(" ".join(paragraphs))
        out = []
        while queue and queue[0].section_path == path and _norm(queue[0].text) in leaf:
            p = queue.popleft()
            out.append({"id": p.id, "text": p.text})
        return out

    toc: list[dict[str, Any]] = []

    def walk(sections: list[Section], path: tuple[str, ...], depth: int) -> list[dict[str, Any]]:
        nodes = []
        for s in sections:
            p = (*path, s.title)
            toc.append({"depth": depth, "title": s.title, "path": list(p)})
            node: dict[str, Any] = {"title": s.title, "level": s.level, "path": list(p), "passages": take(p, s.paragraphs)}
            node["sections"] = walk(s.children, p, depth + 1)
            nodes.append(node)
        return nodes

    lead_passages = take((), doc.lead)
    sections = walk(doc.sections, (), 1)
    row = next(store.iter_docs([doc.id]), None)
    out: dict[str, Any] = {
        "id": doc.id,
        "title": doc.title,
        "summary": row.summary if row is not None else doc.summary(),
        "lead": list(doc.lead),
        "lead_passages": lead_passages,
        "toc": toc,
        "sections": sections,
        "categories": list(doc.categories),
        "links": list(doc.links[:MAX_LINKS]),
        "links_total": len(doc.links),
        "aliases": list(doc.aliases),
        "sources": list(doc.metadata.get("sources") or []),  # the parts of a merged document (hiera.corpus.dedup)
    }
    if queue:  # the tree and the stored passages disagree; show them rather than lose them
        out["other_passages"] = [{"id": p.id, "text": p.text, "section_path": list(p.section_path)} for p in queue]
    return out
