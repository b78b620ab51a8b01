"""The set planner: a set query → its :class:`SetPlan` (parse, candidates per constraint, probabilities).

Everything the ``sets`` method (:mod:`hiera.retrieve.sets`, whose docstring
describes the method end to end) computes before thresholds are applied,
so that ``hiera sets tune`` can search thresholds over the same plans the
method would make, and the method only applies them, combines the sets and
writes the trace. Steps: parse (:mod:`hiera.sets.parser`), candidates per
constraint (BM25 ∪ dense passage-max, RRF), classifier probabilities scored
lazily (:func:`score_lazily`), the lead coverage blended in
(:mod:`hiera.sets.lexical`), each constraint's role (:func:`roles_of`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any, NamedTuple

import numpy as np

from hiera.collection import Collection
from hiera.errors import HieraError
from hiera.fusion import Ranked, by_max, rrf
from hiera.index.masked import bm25_top
from hiera.query import Allowed, text_query
from hiera.score.docstage import stage
from hiera.sets.classifier import ROLES, SetClassifier, document_input
from hiera.sets.expr import And, Atom, Diff, Expr, Or, SetResult, atoms, evaluate_trace, soft_scores
from hiera.sets.lexical import LEXICAL_EVIDENCE, ConstraintTerms, LeadMatcher, lead_text
from hiera.sets.parser import ParseResult, get_parser

NO_CLASSIFIER_THRESHOLD = 0.8
PRUNE_FLOOR = 0.02  # below this probability for a required constraint, the other constraints are not asked


@dataclass
class SetPlan:
    """Everything ``sets`` computes for one query before thresholds: what a threshold search re-reads."""

    query: str
    expr: Expr
    parse: ParseResult | None
    roles: dict[str, str]  # constraint -> "positive" | "conjunct" | "negative" | "query" (roles_of)
    candidates: dict[str, dict[str, int]]  # constraint -> {"bm25": n, "dense": n, "union": n}
    pool: list[str]  # candidate documents of the positive constraints (ids), in retrieval order
    scores: dict[str, dict[str, float]]  # constraint -> document id -> probability
    classifier: str | None  # the classifier's name, None: retrieval scores
    titles: dict[str, str] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)
    # with a classifier: each scored document's lead coverage of the constraint (lexical evidence, hiera.sets.lexical)
    lexical: dict[str, dict[str, float]] = field(default_factory=dict)
    probabilities: dict[str, dict[str, float]] | None = None  # the classifier's own, when ``scores`` are blended

    def blend(self, weight: float) -> SetPlan:
        """This plan with ``scores = (1 − weight) · probability + weight · lexical`` (weight 0: the probabilities)."""
        probs = self.probabilities if self.probabilities is not None else self.scores
        if weight <= 0 or not self.lexical:
            return replace(self, scores=probs, probabilities=None)
        mixed = {
            c: {d: (1.0 - weight) * p + weight * self.lexical.get(c, {}).get(d, 0.0) for d, p in table.items()}
            for c, table in probs.items()
        }
        return replace(self, scores=mixed, probabilities=probs)

    def members(self, thresholds: dict[str, float]) -> dict[str, dict[str, float]]:
        """Accepted documents per constraint, with ``thresholds`` per role."""
        return {
            c: {d: s for d, s in table.items() if s >= thresholds[self.roles[c]]} for c, table in self.scores.items()
        }

    def answer(self, thresholds: dict[str, float]) -> tuple[SetResult, list[tuple[str, float]], list[tuple[str, float]]]:
        """The set algebra's result, the members (best first) and the other candidates by soft score."""
        members = self.members(thresholds)
        res = evaluate_trace(self.expr, members, self.scores)
        rest_ids = [d for d in self.pool if d not in res.scores]
        soft = soft_scores(self.expr, members, self.scores, rest_ids)
        pool_rank = {d: i for i, d in enumerate(self.pool)}
        rest = sorted(((d, soft[d]) for d in rest_ids), key=lambda x: (-x[1], pool_rank[x[0]]))
        return res, res.ranked(), rest


def roles_of(expr: Expr, decompose: bool = True) -> dict[str, str]:
    """Each constraint's role, which picks its threshold.

    ``negative``: subtracted by a difference (and used nowhere else);
    ``conjunct``: a side of an intersection after its first — the qualifier
    of "American singers who were also dancers" (it only confirms members of
    the set the first side names, and every side must pass, so it may want a
    lower threshold than a constraint that stands alone); ``positive``: any
    other (a whole query's only constraint, a union's alternative, a
    difference's left side, an intersection's first side — the set the query
    asks for, which must be as sure as a set standing alone); ``query``: the
    whole query, undecomposed.

    Were the first side of an intersection a ``conjunct`` too, one
    threshold would serve "American filmmakers" and
    "filmmakers born in the 20th century": tuned low for the qualifier (whose
    classifier is unsure of birth dates the text rarely states), it would let
    non-American filmmakers through. As ``positive`` the set asked for keeps
    its own threshold (bench/README.md: intersections' avg F1 on the test
    split, a development split, 34 → 58).
    """
    if not decompose:
        return {a.text: "query" for a in atoms(expr)}
    seen: dict[str, set[str]] = {}

    def walk(node: Expr, role: str) -> None:
        if isinstance(node, Atom):
            seen.setdefault(node.text, set()).add(role)
        elif isinstance(node, Diff):
            walk(node.left, role)
            walk(node.right, "negative")
        elif isinstance(node, And):
            for i, c in enumerate(node.children):
                walk(c, "negative" if role == "negative" else role if i == 0 else "conjunct")
        else:
            for c in node.children:
                walk(c, role)

    walk(expr, "positive")
    order = ("positive", "conjunct", "negative")
    return {a.text: next(r for r in order if r in seen[a.text]) for a in atoms(expr)}


def score_lazily(
    expr: Expr,
    own: dict[str, list[str]],
    classify: Callable[[str, list[str]], dict[str, float]],
    floor: float = PRUNE_FLOOR,
) -> dict[str, float]:
    """Classify what ``expr`` needs, skipping documents a required constraint already rules out.

    A constraint is scored on the documents that can matter for it: its own
    candidates when it is positive; inside an intersection, every side's
    candidates (a member of A ∩ B may have been retrieved for B only); a
    subtracted constraint only on what it is subtracted from. Sides are scored
    left to right, and a document whose probability for an earlier required
    side (an intersection's, a difference's left) is below ``floor`` is not
    scored for the later ones: it can be neither a member nor ranked near one.
    ``classify(text, docs)`` scores (and remembers) one constraint. Returns the
    soft score of every document scored for the expression's positive side.
    """

    def cands(node: Expr) -> list[str]:
        if isinstance(node, Atom):
            return own.get(node.text, [])
        if isinstance(node, Diff):
            return cands(node.left)
        return list(dict.fromkeys(d for c in node.children for d in cands(c)))

    def run(node: Expr, docs: list[str], with_own: bool) -> dict[str, float]:
        if isinstance(node, Atom):
            todo = list(dict.fromkeys([*docs, *(own.get(node.text, []) if with_own else [])]))
            return classify(node.text, todo) if todo else {}
        if isinstance(node, Or):
            out: dict[str, float] = {}
            for c in node.children:
                for d, v in run(c, docs, with_own).items():
                    out[d] = max(v, out.get(d, 0.0))
            return out
        if isinstance(node, And):
            alive = list(dict.fromkeys([*docs, *(cands(node) if with_own else [])]))
            soft = dict.fromkeys(alive, 1.0)
            for c in node.children:
                got = run(c, [d for d in alive if soft[d] >= floor], False)
                for d in alive:
                    soft[d] = min(soft[d], got.get(d, 0.0))
            return soft
        assert isinstance(node, Diff)
        left = run(node.left, docs, with_own)
        right = run(node.right, [d for d, v in left.items() if v >= floor], False)
        return {d: v * (1.0 - right.get(d, 0.0)) for d, v in left.items()}

    return run(expr, [], True)



@dataclass(frozen=True)
class Prepared:
    """What a batch's preparation made for one query: its parse, its expression, the batch's constraint vectors."""

    parse: ParseResult | None
    expr: Expr
    vectors: dict[str, np.ndarray]  # constraint text → passage-encoder query vector (every constraint of the batch)
    encode_ms: float
    parse_ms: float


class _DocText(NamedTuple):
    """What a planner keeps of one document."""

    input: str  # title, newline, text: what the classifier reads (hiera.sets.classifier.document_input)
    lead: str  # title and first sentence (hiera.sets.lexical.lead_text)
    lead_terms: frozenset[str]  # the lead through the collection's BM25 analyzer



class SetPlanner:
    """Parse, retrieve per constraint and classify, over one collection: every :class:`SetPlan` comes from here.

    ``load_classifier(path)`` returns the classifier a ``classifier``
    parameter names (the ``sets`` retriever passes its cached directory
    loader; ``hiera sets tune`` a plain one). Document texts and the lead
    matcher are cached per planner.
    """

    def __init__(self, col: Collection, load_classifier: Callable[[str | None], SetClassifier | None]) -> None:
        self.col = col
        self._load_classifier = load_classifier
        self._parsers: dict[tuple[str, str | None, float | None], Any] = {}
        self._docs: dict[str, _DocText] = {}
        self._matcher: LeadMatcher | None = None

    def classifier(self, path: str | None) -> SetClassifier | None:
        """The :class:`~hiera.sets.classifier.SetClassifier` at ``path`` (loaded once by the caller's loader), or None."""
        return self._load_classifier(path)

    def parser(self, name: str, url: str | None = None, timeout: float = 10.0) -> Any:
        """The set parser ``name`` (``endpoint`` with its URL and timeout), made once per planner."""
        key = (name, url, timeout) if name == "endpoint" else (name, None, None)
        if key not in self._parsers:
            self._parsers[key] = get_parser(name, url=url, timeout=timeout) if name == "endpoint" else get_parser(name)
        return self._parsers[key]

    def _document(self, doc_id: str) -> _DocText:
        """What the classifier reads of a document and its lead, from one read of the store (cached)."""
        got = self._docs.get(doc_id)
        if got is None:
            title, _, body = self.col.doc_text(doc_id).partition("\n")
            lead = lead_text(title, body)
            got = _DocText(document_input(title, body), lead, self.lead_matcher().lead_terms(lead))
            if len(self._docs) > 200_000:
                self._docs.clear()
            self._docs[doc_id] = got
        return got

    def lead_matcher(self) -> LeadMatcher:
        """Lead coverage with the collection's BM25 analyzer and document frequencies (:mod:`hiera.sets.lexical`)."""
        if self._matcher is None:
            bm = self.col.bm25_docs
            self._matcher = LeadMatcher(bm.analyzer, bm.df, bm.size)
        return self._matcher

    def lead_coverage(self, constraint: str, doc_ids: list[str]) -> dict[str, float]:
        """Each document's lead coverage of ``constraint``: the lexical evidence blended with the classifier."""
        terms: ConstraintTerms = self.lead_matcher().terms(constraint)
        out = {}
        for d in doc_ids:
            doc = self._document(d)
            out[d] = LeadMatcher.coverage(terms, doc.lead_terms, doc.lead)
        return out

    # -- batch preparation: parse every query, encode every constraint once --------------
    def prepare(self, queries: list[str], params: dict[str, Any]) -> list[Prepared]:
        """Per query: its parse and expression; every constraint of the batch encoded once (``vectors``)."""
        t = time.perf_counter()
        parsed: list[ParseResult | None] = []
        exprs: list[Expr] = []
        for q in queries:
            if params["decompose"]:
                r = self.parser(params["parser"], params.get("parser_url"), params.get("parser_timeout", 10.0)).parse(q)
                parsed.append(r)
                exprs.append(r.expression)
            else:
                parsed.append(None)
                exprs.append(Atom(q))
        parse_ms = (time.perf_counter() - t) * 1000 / max(1, len(queries))
        texts = list(dict.fromkeys(a.text for e in exprs for a in atoms(e)))
        vecs: dict[str, np.ndarray] = {}
        encode_ms = 0.0
        if self.col.has_dense and texts:
            encoder = self.col.passage_encoder
            t = time.perf_counter()
            vecs = dict(zip(texts, encoder.encode_query(texts), strict=True))
            encode_ms = (time.perf_counter() - t) * 1000 / len(queries)
        return [Prepared(p, e, vecs, encode_ms, parse_ms) for p, e in zip(parsed, exprs, strict=True)]

    # -- the plan: everything before thresholds -----------------------------------------
    def _retrieve(self, text: str, n: int, prep: Prepared,
                  allowed: Allowed | None = None) -> tuple[list[int], dict[str, int], np.ndarray]:
        """Candidate positions of one constraint (BM25 ∪ dense), the counts, and their RRF score / best; with a
        filter (``allowed``), of the allowed documents only, so every set the algebra forms lies inside it."""
        col = self.col
        n = min(n, col.n_docs)
        if allowed is None:
            bpos, bsc = col.bm25_docs.search(text, n)
        else:
            bpos, bsc = bm25_top(col.bm25_docs, text, n, allowed, "doc")
        lists = [Ranked(np.asarray(bpos, dtype=np.int64), np.asarray(bsc, dtype=np.float32))]
        counts = {"bm25": len(bpos), "dense": 0}
        vec = prep.vectors.get(text)
        if vec is not None:
            q = text_query(text, qp=vec)
            q.batch.filter = allowed
            dpos, dsc = stage("passage-max").top(col, q, n)  # a document scores as its best passage
            lists.append(Ranked(dpos, dsc))
            counts["dense"] = len(dpos)
        aligned, fused = rrf(lists)
        counts["union"] = len(aligned.ids)
        # retrieval order: by fused rank, best first
        order = np.argsort(-fused, kind="stable")
        return [int(x) for x in aligned.ids[order]], counts, by_max(fused[order])

    def plan(self, query: str, params: dict[str, Any], prep: Prepared, allowed: Allowed | None = None) -> SetPlan:
        """Parse, retrieve and score one query (no thresholds applied); ``allowed``: a search filter's masks."""
        expr: Expr = prep.expr
        decompose = params["decompose"]
        roles = roles_of(expr, decompose)
        clf = self.classifier(params.get("classifier"))
        timings: dict[str, float] = {}
        t = time.perf_counter()
        own: dict[str, list[str]] = {}
        counts: dict[str, dict[str, int]] = {}
        rscores: dict[str, dict[str, float]] = {}
        titles: dict[str, str] = {}
        for text, role in roles.items():
            if role == "negative" and clf is not None:
                counts[text] = {"bm25": 0, "dense": 0, "union": 0}
                continue  # scored on what it is subtracted from
            pos, c, sc = self._retrieve(text, params["candidates"], prep, allowed)
            rows = self.col.docs_at(pos)
            ids = [r.id for r in rows]
            titles.update({r.id: r.title for r in rows})
            own[text], counts[text] = ids, c
            rscores[text] = {d: float(s) for d, s in zip(ids, sc, strict=True)}
        pool = list(dict.fromkeys(d for text, role in roles.items() if role != "negative" for d in own.get(text, [])))
        timings["candidates"] = (time.perf_counter() - t) * 1000
        t = time.perf_counter()
        scores: dict[str, dict[str, float]] = {text: {} for text in roles}
        if clf is None:
            for text in roles:
                scores[text] = rscores.get(text, {})
        else:

            def classify(text: str, docs: list[str]) -> dict[str, float]:
                inputs = [self._document(d).input for d in docs]
                probs = clf.score(text, docs, inputs)
                got = {d: float(p) for d, p in zip(docs, probs, strict=True)}
                scores[text].update(got)
                return got

            score_lazily(expr, own, classify)
        lexical: dict[str, dict[str, float]] = {}
        if clf is not None:
            lexical = {text: self.lead_coverage(text, list(table)) for text, table in scores.items() if table}
        timings["classify"] = (time.perf_counter() - t) * 1000
        plan = SetPlan(
            query=query, expr=expr, parse=prep.parse, roles=roles, candidates=counts, pool=pool,
            scores=scores, classifier=clf.name if clf is not None else None, titles=titles, timings=timings,
            lexical=lexical,
        )
        return plan.blend(self.retrieval_weight(params)) if clf is not None else plan

    def retrieval_weight(self, params: dict[str, Any]) -> float:
        """``lexical_weight`` when given, else the classifier's tuned one (``hiera sets tune``), else 0."""
        if params.get("lexical_weight") is not None:
            return float(params["lexical_weight"])
        clf = self.classifier(params.get("classifier"))
        if clf is None:
            return 0.0
        if not clf.thresholds.evidence_matches():
            raise HieraError(
                f"{clf.path}/hiera-sets.json blends lexical evidence other than {LEXICAL_EVIDENCE!r}: "
                "run hiera sets tune again, or pass --set lexical_weight=W"
            )
        mode = "decomposed" if params["decompose"] else "query"
        return float(clf.thresholds.lexical_weight.get(mode, 0.0))

    def thresholds(self, params: dict[str, Any]) -> tuple[dict[str, float], str]:
        """Threshold per role, and where they come from."""
        if params.get("threshold") is not None:
            t = float(params["threshold"])
            return dict.fromkeys(ROLES, t), "parameter"
        clf = self.classifier(params.get("classifier"))
        if clf is None:
            t = NO_CLASSIFIER_THRESHOLD
            return dict.fromkeys(ROLES, t), "retrieval baseline (no classifier)"
        th = clf.thresholds
        return {r: th.for_role(r) for r in ROLES}, th.source

    def batch_plans(self, queries: list[str], params: dict[str, Any]) -> list[SetPlan]:
        """:meth:`plan` for many queries (constraints encoded in one batch): what ``hiera sets tune`` reads.

        ``params``: the ``sets`` method's parameters, complete and checked (:data:`hiera.spec.METHODS`).
        """
        return [self.plan(q, params, prep) for q, prep in zip(queries, self.prepare(queries, params), strict=True)]
