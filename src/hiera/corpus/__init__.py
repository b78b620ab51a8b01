"""Structured documents, passage splitting and the SQLite corpus store."""

from hiera.corpus.tree import Document, Passage, PassageRules, Section

__all__ = ["Document", "Passage", "PassageRules", "Section"]
