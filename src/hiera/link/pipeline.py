"""The linking pipeline: question → mentions → entity, event and decomposition linking → the linked documents.

One :class:`Linker` per collection (:func:`linker_for` keeps it with the
collection, :meth:`~hiera.collection.Collection.derived`, so the ``linking`` retriever and DHR's ``linked``
document stage share one alias index and one spaCy model). For a question:

1. **mentions** (:mod:`hiera.link.mentions`);
2. **entity linking** of the mentions: the top ``entity_titles`` documents;
3. **event linking** of the whole question: the top ``event_titles``;
4. **decomposition** (:mod:`hiera.link.decompose`): sub-questions (rules) or
   sentence sets (endpoint). A bridge sub-question is filled with an entity
   of the first hop's top passage (the best BM25 passage, for the first
   hop, among the documents linked to it): the first entity of the expected
   type that is not in the question, preferring one that names a document;
5. **decomposition linking**: event linking of every sub-question / sentence
   (``decomposition_titles`` each) and, for a filled bridge, entity lookup
   of the bridge entity; and, unless ``decomposer=none``, the implicit
   bridge hop (:meth:`Linker._expand`): documents *named* in the first
   passages of the top entity- and event-linked documents (a capitalized
   name that is exactly a title or alias), the ``decomposition_titles``
   most similar to the question. A question rarely names its second hop
   ("the former Governor of Arkansas"); its first hop's document does.

The linked documents are the union; each keeps every source that linked it
(entity with its mention, event, or the sub-question / sentence) and a
score: reciprocal-rank fusion of the source lists, divided by the best. A
question with no mention still gets event linking, and an empty union says
why in :attr:`LinkResult.notes`.
"""

from __future__ import annotations

import re
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from hiera.collection import Collection
from hiera.fusion import Ranked, by_max, rrf
from hiera.link.decompose import BRIDGE, Decomposer, Decomposition, get_decomposer
from hiera.link.entity import Candidate, EntityLinker
from hiera.link.event import EventHit, EventLinker
from hiera.link.mentions import Mention, MentionDetector
from hiera.link.nlp import SpacyModel
from hiera.link.titles import TitleIndex
from hiera.results import TraceStep
from hiera.text import name_key

LINKER_KEY = "hiera.link.pipeline.Linker"
EXPAND_FROM = 3  # entity-linked and event-linked documents whose names open the implicit bridge hop
# a capitalized name, lower-case connectors allowed inside ("Governor of Arkansas", "Kiss and Tell")
_NAME = re.compile(r"[A-Z][\w'’.\-]*(?:\s+(?:(?:of|the|and|de|for|in|on|&)\s+)*[A-Z][\w'’.\-]*)*")


@dataclass(frozen=True)
class LinkSettings:
    """How many titles each source links, and which decomposer writes the sub-questions."""

    entity_titles: int = 10
    event_titles: int = 5
    decomposition_titles: int = 5
    decomposer: str = "rules"
    decomposer_url: str | None = None
    decomposer_timeout: float = 10.0

    @classmethod
    def from_params(cls, params: dict[str, Any]) -> LinkSettings:
        names = cls.__dataclass_fields__
        return cls(**{k: v for k, v in params.items() if k in names and v is not None})


@dataclass
class Source:
    """Why a document was linked: which source, through what, with what score and rank there."""

    source: str  # "entity" | "event" | "decomposition" | "bridge"
    via: str  # the mention, "question", or the sub-question / sentence
    score: float
    rank: int

    def to_dict(self) -> dict[str, Any]:
        return {"source": self.source, "via": self.via, "score": round(self.score, 4), "rank": self.rank}


@dataclass
class LinkResult:
    """Everything the pipeline found for one question, in the order it found it."""

    question: str
    mentions: list[Mention] = field(default_factory=list)
    entities: list[Candidate] = field(default_factory=list)
    entity_candidates: int = 0
    events: list[EventHit] = field(default_factory=list)
    decomposition: Decomposition | None = None
    bridge: dict[str, Any] | None = None
    per_text: dict[str, list[EventHit]] = field(default_factory=dict)
    docs: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))  # linked document positions, best first
    scores: np.ndarray = field(default_factory=lambda: np.zeros(0, np.float32))
    sources: dict[int, list[Source]] = field(default_factory=dict)
    titles: dict[int, str] = field(default_factory=dict)
    doc_ids: dict[int, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    expansion: list[dict[str, Any]] = field(default_factory=list)  # documents named in the first hop's documents
    qd: np.ndarray | None = None  # the question's document-encoder vector (None without a dense index)
    timings: dict[str, float] = field(default_factory=dict)

    def steps(self) -> list[TraceStep]:
        """The trace of the linking steps (mentions … linked documents)."""
        t = self.timings
        d = self.decomposition
        steps = [
            TraceStep("mentions", {"mentions": [m.to_dict() for m in self.mentions],
                                   **({"note": "no mention detected: event linking still runs"} if not self.mentions else {})},
                      t.get("mentions", 0.0)),
            TraceStep("entity-linking", {"candidates_scored": self.entity_candidates,
                                         "linked": [c.to_dict() for c in self.entities]}, t.get("entity-linking", 0.0)),
            TraceStep("event-linking", {"text": self.question, "linked": [e.to_dict() for e in self.events]},
                      t.get("event-linking", 0.0)),
            TraceStep("decomposition", {**(d.to_dict() if d is not None else {}),
                                        **({"bridge": self.bridge} if self.bridge else {})}, t.get("decomposition", 0.0)),
            TraceStep("decomposition-linking", {"per_text": {k: [e.to_dict() for e in v] for k, v in self.per_text.items()},
                                                "named_in_first_hop": self.expansion},
                      t.get("decomposition-linking", 0.0)),
        ]
        linked = [
            {"title": self.titles[int(doc)], "doc_id": self.doc_ids[int(doc)], "score": round(float(s), 4),
             "sources": [src.to_dict() for src in self.sources[int(doc)]]}
            for doc, s in zip(self.docs, self.scores, strict=True)
        ]
        detail: dict[str, Any] = {"documents": len(self.docs), "linked": linked,
                                  "by_source": self.source_counts()}
        if self.notes:
            detail["notes"] = list(self.notes)
        steps.append(TraceStep("linked-documents", detail, t.get("union", 0.0)))
        return steps

    def source_counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for srcs in self.sources.values():
            for s in {x.source for x in srcs}:
                out[s] = out.get(s, 0) + 1
        return out


class Linker:
    """The pipeline of the module docstring for one collection; components load on first use."""

    def __init__(self, col: Any, nlp: SpacyModel | None = None) -> None:
        self.col = col
        self.nlp = nlp or SpacyModel()
        self.mentions = MentionDetector(self.nlp)
        self._titles: TitleIndex | None = None
        self._decomposers: dict[tuple[str, str | None, float], Decomposer] = {}
        self._lock = threading.Lock()

    @property
    def titles(self) -> TitleIndex:
        with self._lock:
            if self._titles is None:
                self._titles = TitleIndex.from_collection(self.col)
        return self._titles

    def load(self) -> None:
        """Open what the first question reads besides spaCy: the alias index, its keys and BM25, the passages' BM25.

        Each is loaded once; a cold call does it while spaCy parses elsewhere.
        """
        titles = self.titles
        _ = titles.keys, titles.table.bm25
        if "bm25" in self.col.built:
            _ = self.col.bm25_passages

    def warm(self) -> None:
        """Load everything a first question would: spaCy, the alias index, its BM25 and (with dense) its vectors."""
        self.nlp("warm up")
        self.load()
        titles = self.titles
        titles.bm25("warm", 1)
        if self.col.has_dense:
            titles.dense(self.col.doc_encoder, self.col.doc_encoder.encode_query(["warm"])[0], 1)

    def decomposer(self, s: LinkSettings) -> Decomposer:
        key = (s.decomposer, s.decomposer_url, s.decomposer_timeout)
        if key not in self._decomposers:
            self._decomposers[key] = get_decomposer(s.decomposer, self.nlp, s.decomposer_url, s.decomposer_timeout)
        return self._decomposers[key]

    def _encode(self, texts: list[str]) -> dict[str, np.ndarray]:
        if not texts or not self.col.has_dense:
            return {}
        vecs = self.col.doc_encoder.encode_query(texts)
        return dict(zip(texts, vecs, strict=True))

    def link(self, question: str, settings: LinkSettings | None = None, qd: np.ndarray | None = None) -> LinkResult:
        s = settings or LinkSettings()
        titles = self.titles
        res = LinkResult(question)
        tm = res.timings
        decomposer = self.decomposer(s)  # an unknown name or a missing URL fails before any work

        t = time.perf_counter()
        parse = self.nlp.submit(question)  # a child process parses while the indexes below load (SpacyModel.beside)
        self.load()
        doc = parse()
        res.mentions = self.mentions.detect(question, doc)
        tm["mentions"] = (time.perf_counter() - t) * 1000

        t = time.perf_counter()
        names = [m.text for m in res.mentions if m.kind in ("entity", "quoted", "capitalized")]
        vecs = self._encode(list(dict.fromkeys([question, *names]))) if qd is None else \
            {question: qd, **self._encode(list(dict.fromkeys(names)))}
        qd = vecs.get(question)
        res.qd = qd
        entity = EntityLinker(self.col, titles)
        res.entities, res.entity_candidates = entity.link(question, res.mentions, s.entity_titles, qd, vecs)
        tm["entity-linking"] = (time.perf_counter() - t) * 1000

        t = time.perf_counter()
        event = EventLinker(self.col, titles.titles)
        res.events = event.link(question, s.event_titles, qd)
        tm["event-linking"] = (time.perf_counter() - t) * 1000

        t = time.perf_counter()
        res.decomposition = decomposer.decompose(question, doc)  # the rules reuse the mention detector's parse
        tm["decomposition"] = (time.perf_counter() - t) * 1000

        t = time.perf_counter()
        lists: list[tuple[str, str, list[tuple[int, float]]]] = [
            ("entity", "question", [(c.doc, c.score) for c in res.entities]),
            ("event", "question", [(e.doc, e.score) for e in res.events]),
        ]
        # a list's own text for one of its documents, by (source, the list's text, document)
        where = {("entity", "question", c.doc): c.mention for c in res.entities}
        if s.decomposition_titles > 0:
            self._link_decomposition(res, s, event, entity, lists, where)
        tm["decomposition-linking"] = (time.perf_counter() - t) * 1000

        t = time.perf_counter()
        self._union(res, lists, where)
        tm["union"] = (time.perf_counter() - t) * 1000
        return res

    def _link_decomposition(
        self, res: LinkResult, s: LinkSettings, event: EventLinker, entity: EntityLinker,
        lists: list[tuple[str, str, list[tuple[int, float]]]], where: dict[tuple[str, str, int], str],
    ) -> None:
        d = res.decomposition
        if d is None:
            return
        texts = [q.text for q in d.sub_questions if not q.needs_bridge] + [x for g in d.sentences for x in g]
        vecs = self._encode(texts)
        for text in texts:
            hits = event.link(text, s.decomposition_titles, vecs.get(text))
            res.per_text[text] = hits
            lists.append(("decomposition", text, [(e.doc, e.score) for e in hits]))
        if d.source != "none":
            self._expand(res, s.decomposition_titles, entity, lists, where)
        for i, sub in enumerate(d.sub_questions):
            if not sub.needs_bridge or i == 0:
                continue
            hop1 = d.sub_questions[i - 1].text
            first = [e.doc for e in res.per_text.get(hop1, [])]
            bridge = self.fill_bridge(res.question, hop1, first, sub.answer_type)
            if bridge is None:
                res.notes.append(f"no bridge entity found for {sub.text!r}")
                continue
            filled = sub.text.replace(BRIDGE, bridge["entity"])
            bridge["filled"] = filled
            res.bridge = bridge
            qv = self._encode([filled, bridge["entity"]])
            hits = event.link(filled, s.decomposition_titles, qv.get(filled))
            res.per_text[filled] = hits
            lists.append(("decomposition", filled, [(e.doc, e.score) for e in hits]))
            m = Mention(bridge["entity"], 0, len(bridge["entity"]), "bridge")
            found, _ = entity.link(filled, [m], s.decomposition_titles, qv.get(filled), qv)
            lists.append(("bridge", bridge["entity"], [(c.doc, c.score) for c in found]))

    def _expand(self, res: LinkResult, n: int, entity: EntityLinker, lists: list[tuple[str, str, list[tuple[int, float]]]],
                where: dict[tuple[str, str, int], str]) -> None:
        """The implicit bridge hop: documents named in the first hop's documents, most similar to the question first.

        A multi-hop question often never names its second document ("the
        Governor of Arkansas" is Bill Clinton); the first hop's documents do.
        Capitalized names in the first passages of the top :data:`EXPAND_FROM`
        entity-linked and event-linked documents that are exactly a title or
        alias become candidates, ranked by their summary's similarity to the
        question (:meth:`EntityLinker.similarity`); the top ``n`` are linked
        with source ``bridge``, as one list in that order (``where`` gets each one's "named in" text).
        """
        col = self.col
        hop = list(dict.fromkeys([c.doc for c in res.entities[:EXPAND_FROM]] + [e.doc for e in res.events[:EXPAND_FROM]]))
        if not hop or n <= 0:
            return
        named: dict[int, str] = {}
        for doc in hop:
            start = int(col.doc_offsets[doc])
            end = min(int(col.doc_offsets[doc + 1]), start + 2)
            for p in col.passages_at(np.arange(start, end)):
                for m in _NAME.finditer(p.text):
                    for name in _sub_names(m.group(0)):
                        for tm in self.titles.exact(name):
                            if tm.doc not in hop:
                                named.setdefault(tm.doc, p.doc_title)
        if not named:
            return
        docs = np.array(sorted(named), dtype=np.int64)
        sim = entity.similarity(res.question, docs, res.qd)
        order = np.argsort(-sim, kind="stable")[:n]
        res.expansion = [{"title": self.titles.titles[int(docs[i])], "named_in": named[int(docs[i])],
                          "similarity": round(float(sim[i]), 4)} for i in order]
        # one ranked list, most similar first: as separate one-item lists each would fuse as a rank-1 source,
        # level with the best entity link, whatever its similarity
        text = "named in the first hop's documents"
        lists.append(("bridge", text, [(int(docs[i]), float(sim[i])) for i in order]))
        for i in order:
            where[("bridge", text, int(docs[i]))] = f"named in {named[int(docs[i])]}"

    def fill_bridge(self, question: str, hop1: str, docs: list[int], answer_type: str) -> dict[str, Any] | None:
        """The bridge entity from the first hop's top passage (module docstring), with where it came from."""
        col = self.col
        if not docs or "bm25" not in col.built:
            return None
        from hiera.index.select import concat_ranges, topk

        dpos = np.asarray(docs, dtype=np.int64)
        cand = concat_ranges(col.doc_offsets[dpos], col.doc_offsets[dpos + 1])
        if len(cand) == 0:
            return None
        sc = col.bm25_passages.scores_at(hop1, cand)
        best, _ = topk(sc, 1)
        passage = col.passages_at(cand[best])[0]
        labels = set(answer_type.split("|")) if answer_type else set()
        qkey = name_key(question)
        options = []
        for ent in self.nlp(passage.text).ents:
            key = name_key(ent.text)
            if not key or key in qkey or (labels and ent.label_ not in labels):
                continue
            options.append((not self.titles.exact(ent.text), len(options), ent.text, ent.label_))
        out: dict[str, Any] = {"hop": hop1, "passage": passage.id, "passage_title": passage.doc_title}
        if options:
            _, _, text, label = min(options)
            return {**out, "entity": text, "label": label, "how": f"first {answer_type or 'named'} entity of the "
                    "first hop's top passage not in the question" + (", naming a document" if self.titles.exact(text) else "")}
        return {**out, "entity": passage.doc_title, "label": "", "how": "the first hop's top passage's title (no entity of the expected type)"}

    def _union(self, res: LinkResult, lists: list[tuple[str, str, list[tuple[int, float]]]],
               where: dict[tuple[str, str, int], str]) -> None:
        ranked = []
        for source, text, items in lists:
            for rank, (doc, score) in enumerate(items, start=1):
                res.sources.setdefault(doc, []).append(Source(source, where.get((source, text, doc), text), score, rank))
            if items:
                ranked.append(Ranked(np.array([d for d, _ in items], np.int64), np.array([x for _, x in items], np.float32)))
        if not ranked:
            res.notes.append("nothing linked: no mention matched a title and the question matched no summary")
            return
        aligned, fused = rrf(ranked)
        order = np.argsort(-fused, kind="stable")
        res.docs = aligned.ids[order]
        res.scores = by_max(fused[order])
        rows = self.col.docs_at(res.docs)
        res.titles = {int(d): r.title for d, r in zip(res.docs, rows, strict=True)}
        res.doc_ids = {int(d): r.id for d, r in zip(res.docs, rows, strict=True)}


def _sub_names(run: str, longest: int = 6) -> list[str]:
    """A capitalized run and its contiguous sub-spans that start and end with a capitalized word, longest first.

    "President Bill Clinton" → itself, "President Bill", "Bill Clinton", "President", "Bill", "Clinton".
    """
    words = run.rstrip(".'’-").split()
    out = []
    for size in range(min(len(words), longest), 0, -1):
        for i in range(len(words) - size + 1):
            span = words[i : i + size]
            if span[0][:1].isupper() and span[-1][:1].isupper():
                out.append(" ".join(span))
    return out


def linker_for(col: Collection, nlp: SpacyModel | None = None) -> Linker:
    """The collection's one :class:`Linker`, made on first use and kept with it (:meth:`Collection.derived`).

    ``nlp`` is the spaCy model a linker made now uses (the CLI passes one that loads in a child process); a linker
    that already exists keeps its own.
    """
    return col.derived(LINKER_KEY, lambda: Linker(col, nlp))
