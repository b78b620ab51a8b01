"""Tiny real SQuAD samples for the reader and FetchHR tests (read from ../shared/data, never copied into the repo)."""

from __future__ import annotations

import json
from pathlib import Path

from hiera.corpus.tree import PassageRules

N_ARTICLES, N_PARAGRAPHS, N_QUESTIONS = 2, 3, 2
RULES = PassageRules(max_words=60)  # short passages: short windows, a fast CPU test


def tiny_squad(data_dir: Path, out: Path) -> Path:
    """The first paragraphs and questions of the first SQuAD train articles, in SQuAD's own schema."""
    src = json.loads((data_dir / "squad" / "train-du2017-44articles.json").read_text(encoding="utf-8"))
    arts = []
    for art in src["data"][:N_ARTICLES]:
        paras = [{**p, "qas": p["qas"][:N_QUESTIONS]} for p in art["paragraphs"][:N_PARAGRAPHS]]
        arts.append({"title": art["title"], "paragraphs": paras})
    out.write_text(json.dumps({"version": "1.1", "data": arts}), encoding="utf-8")
    return out


def squad_article(data_dir: Path, out: Path, paragraphs: int = 8) -> Path:
    """The first ``paragraphs`` of the first SQuAD dev article, with their questions, in SQuAD's own schema."""
    art = json.loads((data_dir / "squad" / "dev-v1.1.first24.json").read_text(encoding="utf-8"))["data"][0]
    small = {"version": "1.1", "data": [{"title": art["title"], "paragraphs": art["paragraphs"][:paragraphs]}]}
    out.write_text(json.dumps(small), encoding="utf-8")
    return out
