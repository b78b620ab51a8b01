"""Real-text distractors at scale: sentences of documents no evaluation question is about, recombined.

``bench.scale_real`` needs the pooled corpus plus a million or more passages
that BM25 and the dense encoder both find plausible: real English sentences,
real titles, real section names, in Wikipedia's shape (a lead and sections).
No such corpus installs offline, so this module makes one from what does:

* sources: the ~10k ovos Wikipedia summaries, the HotpotQA paragraph pool,
  the 44 SQuAD *train* articles, BEIR SciFact abstracts, the WikiText-2
  articles (with their section headings), the gensim Wikipedia dump excerpt,
  StrategyQA's facts and term descriptions;
* never a sentence of a SQuAD dev article (both halves: the questions we
  report on and the hidden ones are about those), and never a source
  document whose title is a SQuAD dev article's title (its sentences would
  be about what the questions ask);
* every distractor document keeps its source document's title; its lead and
  sections (named with real section headings) are passages of 3–6 of the
  source's sentences, drawn at random (seeded), half of them mixed with
  one or two sentences of another document of the same source; a source is
  drawn in proportion to its number of sentences.

Sentences repeat across distractors (there are ~10× fewer source sentences
than passage slots), but the passages do not: each is a new combination.
The generator is deterministic in ``seed`` and ``passages``, so the texts —
and the embedding cache keyed by their hashes — stay the same from run to run.
"""

from __future__ import annotations

import json
import random
import re
from bisect import bisect_right
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import accumulate
from pathlib import Path

from hiera.corpus.tree import Document, Section

VERSION = 1  # bump when the generated texts change (the cache then re-encodes them)
_SENT = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(])")
_WS = re.compile(r"\s+")
MIN_WORDS, MAX_WORDS = 4, 60
PASSAGE_WORDS = 100  # hiera's default passage length: a distractor section is one passage


@dataclass
class Source:
    """One source document: its title and its sentences (after the exclusions)."""

    kind: str
    title: str
    sentences: list[str]


def sentences(text: str) -> list[str]:
    out = []
    for s in _SENT.split(_WS.sub(" ", text).strip()):
        n = len(s.split())
        if MIN_WORDS <= n <= MAX_WORDS:
            out.append(s)
    return out


def _norm_title(t: str) -> str:
    return re.sub(r"[\W_]+", " ", t.replace("_", " ")).strip().lower()


def squad_dev_titles(data: Path) -> set[str]:
    out = set()
    for name in ("dev-v1.1.first24.json", "dev-v1.1.last24.corpus-only.json"):
        for art in json.loads((data / "squad" / name).read_text(encoding="utf-8"))["data"]:
            out.add(_norm_title(art["title"]))
    return out


def load_sources(data: Path) -> tuple[list[Source], list[str]]:
    """Every usable source document, and a pool of real section headings."""
    from hiera.corpus.readers.ovos import ovos_summaries_path
    from hiera.corpus.readers.wikipedia_xml import gensim_dump_path, read_wikipedia_xml
    from hiera.corpus.readers.wikitext import read_wikitext

    banned = squad_dev_titles(data)
    docs: list[Source] = []
    headings: list[str] = []

    def add(kind: str, title: str, text: str) -> None:
        if _norm_title(title) in banned:
            return
        sents = sentences(text)
        if len(sents) >= 3:
            docs.append(Source(kind, title.strip(), sents))

    for rec in json.loads(Path(ovos_summaries_path()).read_text(encoding="utf-8")).values():
        if isinstance(rec, dict) and rec.get("title") and rec.get("extract"):
            add("ovos", str(rec["title"]), str(rec["extract"]))
    pool: dict[str, list[str]] = {}
    for line in (data / "hotpotqa" / "paragraph_pool.500q.jsonl").read_text(encoding="utf-8").splitlines():
        if line.strip():
            rec = json.loads(line)
            pool.setdefault(rec["title"], []).append(rec["text"])
    for title, paras in pool.items():
        add("hotpotqa", title, " ".join(paras))
    for art in json.loads((data / "squad" / "train-du2017-44articles.json").read_text(encoding="utf-8"))["data"]:
        add("squad-train", art["title"].replace("_", " "), " ".join(p["context"] for p in art["paragraphs"]))
    for line in (data / "beir" / "scifact" / "corpus.jsonl").read_text(encoding="utf-8").splitlines():
        if line.strip():
            rec = json.loads(line)
            add("scifact", rec.get("title") or rec["_id"], rec.get("text", ""))
    for source, kind in ((read_wikitext(data / "wikitext2" / "wiki.test.raw"), "wikitext"),
                         (read_wikipedia_xml(gensim_dump_path()), "wikipedia-xml")):
        for rec in source:
            doc = rec if isinstance(rec, Document) else getattr(rec, "document", None)
            if not isinstance(doc, Document):
                continue
            parts = list(doc.lead)
            for sec in _walk(doc.sections):
                headings.append(sec.title)
                parts += sec.paragraphs
            add(kind, doc.title, " ".join(parts))
    for rec in json.loads((data / "strategyqa" / "strategyqa_train.json").read_text(encoding="utf-8")):
        text = " ".join([*(rec.get("facts") or []), rec.get("description") or ""])
        if rec.get("term"):
            add("strategyqa", str(rec["term"]), text)
    headings = sorted({h.strip() for h in headings if 1 <= len(h.split()) <= 4 and h.strip()})
    return docs, headings


def kit_sources(data: Path) -> tuple[list[Source], list[str]]:
    """The sources a lent GPU machine carries (``../shared/gpu/pack.py --data``): SQuAD train and HotpotQA's pool.

    The same exclusions as :func:`load_sources`; without WikiText and the
    Wikipedia dump there are no section headings to draw, so HotpotQA's
    short titles (1-4 words) name the sections. ``bench.gpu_encode`` builds
    its collection from these.
    """
    banned = squad_dev_titles(data)
    docs: list[Source] = []
    pool: dict[str, list[str]] = {}
    for line in (data / "hotpotqa" / "paragraph_pool.500q.jsonl").read_text(encoding="utf-8").splitlines():
        if line.strip():
            rec = json.loads(line)
            pool.setdefault(rec["title"], []).append(rec["text"])
    articles = [(title, " ".join(paras), "hotpotqa") for title, paras in pool.items()]
    for art in json.loads((data / "squad" / "train-du2017-44articles.json").read_text(encoding="utf-8"))["data"]:
        articles.append((art["title"].replace("_", " "), " ".join(p["context"] for p in art["paragraphs"]),
                         "squad-train"))
    for title, text, kind in articles:
        sents = sentences(text)
        if _norm_title(title) not in banned and len(sents) >= 3:
            docs.append(Source(kind, title.strip(), sents))
    headings = sorted({t.strip() for t in pool if 1 <= len(t.split()) <= 4})
    return docs, headings


def _walk(sections: list[Section]) -> Iterator[Section]:
    for s in sections:
        yield s
        yield from _walk(s.children)


def generate(data: Path, passages: int, seed: int = 13,
             sources: tuple[list[Source], list[str]] | None = None) -> Iterator[Document]:
    """Distractor documents, in order, until about ``passages`` passages (each section and the lead: one).

    ``sources``: ``(documents, headings)`` to draw from; default :func:`load_sources`.
    """
    rng = random.Random(seed)
    docs, headings = sources if sources is not None else load_sources(data)
    by_kind: dict[str, list[Source]] = {}
    for d in docs:
        by_kind.setdefault(d.kind, []).append(d)
    # a source is drawn in proportion to its sentences, so a three-sentence summary is not recombined as often as a
    # forty-sentence article (fewer near-copies of the same few sentences)
    cum = list(accumulate(len(d.sentences) for d in docs))
    made = n = 0
    while made < passages:
        src = docs[bisect_right(cum, rng.random() * cum[-1])]
        n += 1
        parts = rng.randint(3, 9)  # the lead and 2–8 sections
        texts = []
        for _ in range(parts):
            k = min(len(src.sentences), rng.randint(3, 6))
            chosen = rng.sample(src.sentences, k)
            if rng.random() < 1 / 2:
                other = rng.choice(by_kind[src.kind])
                chosen += rng.sample(other.sentences, min(len(other.sentences), rng.randint(1, 2)))
                rng.shuffle(chosen)
            texts.append(_fit(chosen))
        names = rng.sample(headings, min(len(headings), parts - 1))
        yield Document(
            id=f"distractor-{VERSION}-{n}",
            title=src.title,
            lead=[texts[0]],
            sections=[Section(title=h, level=2, paragraphs=[t]) for h, t in zip(names, texts[1:], strict=False)],
            metadata={"source": src.kind, "distractor": True},
        )
        made += parts


def _fit(chosen: list[str], limit: int = PASSAGE_WORDS) -> str:
    """The sentences in order while they fit in ``limit`` words (at least one): one passage, never split again."""
    out, words = [], 0
    for s in chosen:
        n = len(s.split())
        if out and words + n > limit:
            break
        out.append(s)
        words += n
    return " ".join(out)


def write_jsonl(path: Path, data: Path, passages: int, seed: int = 13,
                sources: tuple[list[Source], list[str]] | None = None) -> int:
    """Write the distractors as hiera-jsonl (atomically); returns the number of documents."""
    from hiera.io import write_atomic

    count = 0

    def write(tmp: Path) -> None:
        nonlocal count
        with tmp.open("w", encoding="utf-8") as f:
            for d in generate(data, passages, seed, sources):
                f.write(json.dumps(d.to_dict(), ensure_ascii=False) + "\n")
                count += 1

    write_atomic(path, write)
    return count
