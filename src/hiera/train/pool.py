"""The collection as training sees it: every passage and document, in index order.

Training needs random access to texts (to write examples), to each passage's
document and section (In-Doc, In-Sec negatives) and answer checks over many
candidates, so it reads the store once into memory. Positions are the index
positions, so BM25 and dense results can be used directly; the texts are the
very strings the build encodes (titled passages, document summaries), so a
model is trained on what it will later see.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from hiera.collection import Collection
from hiera.errors import IndexMissingError
from hiera.eval.match import MatchMode, has_answer, has_answer_tokens, tokenize


@dataclass
class PassagePool:
    """Texts and structure of one collection, aligned with its index positions."""

    passage_ids: list[str]
    passage_text: list[str]  # raw passage text: what answer matching looks at
    passage_input: list[str]  # titled text: what the passage encoder sees
    passage_doc: np.ndarray  # document position of each passage
    passage_section: np.ndarray  # section number, unique across the collection
    doc_ids: list[str]
    doc_summary: list[str]  # what the document encoder sees
    doc_offsets: np.ndarray  # passages of doc i are [offsets[i], offsets[i+1])

    @classmethod
    def from_collection(cls, col: Collection) -> PassagePool:
        if col.live is not None:  # trainers read passages by position: a build with dead rows is compacted first
            raise IndexMissingError(
                f"{col.root}: documents were removed or replaced since its index files were written; "
                f"run `hiera build {col.root} --compact` before training"
            )
        store = col.store
        docs = list(store.iter_docs())
        sep = store.title_sep
        ids, text, inp, pdoc, psec = [], [], [], [], []
        doc_pos = {d.id: i for i, d in enumerate(docs)}
        sections: dict[tuple[int, tuple[str, ...]], int] = {}
        for _, p in store.iter_passages():
            d = doc_pos[p.doc_id]
            ids.append(p.id)
            text.append(p.text)
            inp.append(p.titled_text(sep))
            pdoc.append(d)
            psec.append(sections.setdefault((d, p.section_path), len(sections)))
        if len(ids) != col.n_passages or len(docs) != col.n_docs:
            raise IndexMissingError(
                f"{col.root}: the index does not match the corpus ({col.n_passages} indexed passages, {len(ids)} stored); "
                f"run `hiera build {col.root}`"
            )
        return cls(
            passage_ids=ids,
            passage_text=text,
            passage_input=inp,
            passage_doc=np.asarray(pdoc, dtype=np.int64),
            passage_section=np.asarray(psec, dtype=np.int64),
            doc_ids=[d.id for d in docs],
            doc_summary=[d.summary for d in docs],
            doc_offsets=np.asarray(col.doc_offsets, dtype=np.int64),
        )

    @cached_property
    def passage_position(self) -> dict[str, int]:
        return {pid: i for i, pid in enumerate(self.passage_ids)}

    @cached_property
    def doc_position(self) -> dict[str, int]:
        return {did: i for i, did in enumerate(self.doc_ids)}

    def doc_passages(self, doc: int) -> range:
        return range(int(self.doc_offsets[doc]), int(self.doc_offsets[doc + 1]))

    def section_passages(self, passage: int) -> list[int]:
        rng = self.doc_passages(int(self.passage_doc[passage]))
        sec = self.passage_section[passage]
        return [i for i in rng if self.passage_section[i] == sec]

    @cached_property
    def _tokens(self) -> dict[int, list[str]]:
        return {}

    def passage_has(self, passage: int, answers: list[str], mode: MatchMode = "string") -> bool:
        """DPR answer matching on the passage text (tokens cached per passage)."""
        if mode != "string":
            return has_answer(answers, self.passage_text[passage], mode)
        toks = self._tokens.get(passage)
        if toks is None:
            toks = self._tokens[passage] = tokenize(self.passage_text[passage])
        return has_answer_tokens(answers, toks)

    def doc_has(self, doc: int, answers: list[str], mode: MatchMode = "string") -> bool:
        """Whether any passage of the document (its full text) contains an answer."""
        return any(self.passage_has(i, answers, mode) for i in self.doc_passages(doc))

    def doc_fulltext(self, doc: int) -> str:
        return "\n".join(self.passage_text[i] for i in self.doc_passages(doc))
