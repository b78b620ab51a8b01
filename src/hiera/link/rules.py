"""The rules decomposer (``decomposer=rules``): spaCy's dependency parse → sub-questions, no network.

Rules for the common multi-hop shapes, tried in order:

  ``comparison`` / ``both``
      two coordinated nominals, at least one a proper noun ("Which is older,
      A or B?", "Were A and B of the same nationality?", "Are both A and B
      genera?"): one sub-question per item, the pair replaced by the item;
  ``conjunction``
      coordinated predicates sharing a subject ("Who directed X and produced
      Y?"): one sub-question per predicate, each with the subject;
  ``comparison`` with "than"
      "Are more people related to Genghis Khan than Julius Caesar?": the
      question without "than B", and the same with B in place of the last
      noun phrase before "than";
  ``temporal``
      "Did A happen before B?": the question without "before B", and "When
      was B?";
  ``bridge``
      a noun phrase that needs its own answer before the question can be
      asked: a common noun with a relative clause or a participle ("the
      woman who portrayed Corliss Archer in Kiss and Tell", "the film
      starring X") or a role noun with an "of" phrase naming an entity ("the
      director of the romantic comedy Big Stone Gap"). The first
      sub-question is that phrase; the second is the question with the
      phrase replaced by :data:`BRIDGE`, to be filled with the first hop's
      answer (the pipeline takes it from the first hop's top passage, an
      entity of :attr:`SubQuestion.answer_type` when the phrase's head says
      which: a person for "director", a place for "city" …);
  ``none``
      the question is one hop: no sub-questions.

"""

from __future__ import annotations

from typing import Any

from hiera.link.decompose import BRIDGE, Decomposition, SubQuestion
from hiera.link.nlp import SpacyModel

_PERSON = frozenset(
    "director actor actress woman man person singer author writer founder player president wife husband son daughter "
    "father mother creator producer composer artist musician novelist poet screenwriter star coach manager owner "
    "leader member brother sister king queen politician officer chairman ceo designer architect painter rapper "
    "vocalist guitarist drummer frontman host journalist scientist footballer presenter narrator".split()
)
_PLACE = frozenset("city country town state place county village province region capital island river".split())
_ORG = frozenset("company band team university club organization group label network school airline firm".split())
_WORK = frozenset("film movie album song book novel series show magazine newspaper game play opera single".split())
_COMPARATIVE = frozenset("first same more most less older younger earlier later longer larger bigger".split())


class RulesDecomposer:
    """The dependency-parse rules of the module docstring."""

    name = "rules"

    def __init__(self, nlp: SpacyModel | None = None) -> None:
        self.nlp = nlp or SpacyModel()

    @classmethod
    def create(cls, nlp: SpacyModel, url: str | None = None, timeout: float = 10.0) -> RulesDecomposer:
        return cls(nlp)

    def decompose(self, question: str, doc: Any = None) -> Decomposition:
        doc = doc if doc is not None else self.nlp(question)
        for rule in (_coordinated_nominals, _coordinated_predicates, _than_comparison, _temporal, _bridge):
            found = rule(question, doc)
            if found is not None:
                return found
        return Decomposition("none")



# -- the rules ------------------------------------------------------------------------------------
def _text(question: str, start: int, end: int) -> str:
    return " ".join(question[start:end].split())


def _span(tokens: Any) -> tuple[int, int]:
    toks = list(tokens)
    return toks[0].idx, toks[-1].idx + len(toks[-1].text)


def _question(text: str) -> str:
    text = " ".join(text.replace(" ,", ",").split()).strip(" ,")
    text = text[:1].upper() + text[1:]
    return text if text.endswith("?") else text.rstrip(".") + "?"


def _is_named(tok: Any) -> bool:
    return tok.pos_ == "PROPN" or tok.ent_type_ != ""


def _coordinated_nominals(question: str, doc: Any) -> Decomposition | None:
    for conj in doc:
        head = conj.head
        if conj.dep_ != "conj" or head.pos_ not in ("PROPN", "NOUN") or conj.pos_ not in ("PROPN", "NOUN"):
            continue
        if not (_is_named(head) or _is_named(conj)):
            continue
        cc = next((t for t in head.children if t.dep_ == "cc" and t.i < conj.i), None)
        if cc is None or cc.lower_ not in ("or", "and"):
            continue
        left = [t for t in doc[head.left_edge.i : cc.i] if t.lower_ != "both" and t.dep_ != "punct"]
        right = list(conj.subtree)
        if not left or not right:
            continue
        items = [_text(question, *_span(left)), _text(question, *_span(right))]
        both = any(t.lower_ == "both" for t in doc[: conj.i])
        first = min(left[0].i, next((t.i for t in doc[: cc.i] if t.lower_ == "both"), left[0].i))
        start, end = doc[first].idx, right[-1].idx + len(right[-1].text)
        subs = [SubQuestion(_question(question[:start] + item + question[end:]).replace(" both ", " ")) for item in items]
        comparative = cc.lower_ == "or" or any(t.tag_ in ("JJR", "RBR", "JJS", "RBS") or t.lower_ in _COMPARATIVE for t in doc)
        shape = "both" if both else ("comparison" if comparative else "conjunction")
        return Decomposition(shape, subs)
    return None


def _coordinated_predicates(question: str, doc: Any) -> Decomposition | None:
    root = next((t for t in doc if t.dep_ == "ROOT"), None)
    if root is None or root.pos_ not in ("VERB", "AUX"):
        return None
    conj = next((t for t in root.children if t.dep_ == "conj" and t.pos_ == "VERB"), None)
    subj = next((t for t in root.children if t.dep_ in ("nsubj", "nsubjpass")), None)
    if conj is None or subj is None or any(t.dep_ in ("nsubj", "nsubjpass") for t in conj.children):
        return None
    cc = next((t for t in root.children if t.dep_ == "cc" and t.i < conj.i), None)
    stop = cc.i if cc is not None else conj.left_edge.i
    first = _text(question, doc[root.left_edge.i].idx, doc[stop - 1].idx + len(doc[stop - 1].text))
    subj_text = _text(question, *_span(subj.subtree))
    second = subj_text + " " + _text(question, *_span(t for t in conj.subtree if t.dep_ != "punct"))
    return Decomposition("conjunction", [SubQuestion(_question(first)), SubQuestion(_question(second))])


def _than_comparison(question: str, doc: Any) -> Decomposition | None:
    """"Is A bigger than B?": one sub-question about A (the comparison's "than B" dropped), one with B for A."""
    than = next((t for t in doc if t.lower_ == "than" and t.i > 0), None)
    if than is None:
        return None
    rest = [t for t in doc[than.i + 1 :] if t.dep_ != "punct"]
    chunks = [c for c in doc.noun_chunks if c.end <= than.i and c.root.pos_ in ("NOUN", "PROPN")]
    if not rest or not chunks:
        return None
    other_start, other_end = _span(rest)
    other = _text(question, other_start, other_end)
    a = chunks[-1]
    without = question[: than.idx].rstrip() + question[other_end:]
    a_start, a_end = a.start_char, a.end_char
    swapped = without[:a_start] + other + without[a_end:]
    return Decomposition("comparison", [SubQuestion(_question(without)), SubQuestion(_question(swapped))])


def _temporal(question: str, doc: Any) -> Decomposition | None:
    """"Did A happen before B?": when A happened (the clause without "before B"), and when B did."""
    marker = next((t for t in doc if t.lower_ in ("before", "after") and t.dep_ in ("prep", "mark") and t.i > 1), None)
    if marker is None:
        return None
    rest = [t for t in doc[marker.i + 1 :] if t.dep_ != "punct"]
    if not rest or not _names_something(rest) and not any(t.pos_ == "NOUN" for t in rest):
        return None
    start, end = _span(rest)
    first = question[: marker.idx].rstrip() + question[end:]
    return Decomposition("temporal", [SubQuestion(_question(first)), SubQuestion(_question("When was " + _text(question, start, end)))])


def _answer_type(head: Any) -> str:
    lemma = head.lemma_.lower()
    if lemma in _PERSON or any(t.lower_ in ("who", "whom", "whose") for t in head.children):
        return "PERSON"
    if lemma in _PLACE:
        return "GPE|LOC|FAC"
    if lemma in _ORG:
        return "ORG"
    if lemma in _WORK:
        return "WORK_OF_ART|ORG|PRODUCT|EVENT"
    return ""


def _names_something(tokens: Any) -> bool:
    return any(_is_named(t) for t in tokens)


def _bridge(question: str, doc: Any) -> Decomposition | None:
    """The innermost qualifying noun phrase becomes the first hop (module docstring)."""
    chosen = None
    for tok in doc:
        if tok.pos_ != "NOUN":
            continue
        clause = [c for c in tok.children if c.dep_ in ("relcl", "acl") and _names_something(c.subtree)]
        of = [c for c in tok.children if c.dep_ == "prep" and c.lower_ == "of" and _names_something(c.subtree)]
        if clause or (of and tok.lemma_.lower() in _PERSON | _PLACE | _ORG | _WORK):
            chosen = tok  # later (deeper in a right-branching chain) wins
            if clause:
                break
    if chosen is None:
        return None
    phrase = [t for t in chosen.subtree if not (t.i == chosen.left_edge.i and t.lower_ in ("what", "which"))]
    if not phrase:
        return None
    start, end = _span(phrase)
    first = _text(question, start, end)
    outer = question[:start] + BRIDGE + question[end:]
    if first.lower().startswith(("the ", "a ", "an ")):
        hop1 = first
    else:
        hop1 = "the " + first
    return Decomposition("bridge", [
        SubQuestion(_question(hop1)),
        SubQuestion(_question(outer), needs_bridge=True, answer_type=_answer_type(chosen)),
    ])
