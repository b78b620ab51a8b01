"""A tiny real SQuAD sample for reader tests (read from ../shared/data, never copied into the repo)."""

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
