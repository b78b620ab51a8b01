"""``sets``: set queries (QUEST) answered with explicit set algebra over classified constraints.

"Shorebirds that are not sandpipers" asks for a *set* of documents. The method:

1. **parse** the query into an expression over atomic constraints
   (:mod:`hiera.sets.parser`; ``parser`` names it). A query the parser cannot
   analyze is one constraint (template ``_``), noted in the trace. With
   ``decompose=false`` the whole query is the one constraint (the paper's
   "retrieve, then classify" baseline);
2. **candidates** of every *positive* constraint (one not on the right of a
   difference): BM25's top ``candidates`` documents (``bm25-doc``) and,
   when the build has a dense index, the dense passage-max stage's top
   ``candidates`` (a document scores as its best passage), united;
3. **classify**: the classifier (``classifier=DIR``, ``hiera
   train-classifier``) gives the probability that each document satisfies
   each constraint. A constraint is scored on the documents that can matter
   for it: its own candidates, plus, inside an intersection, the candidates
   of the other sides (a member of A ∩ B may have been retrieved for B only),
   and a subtracted constraint only on the candidates of what it is
   subtracted from (its own candidates could never be members). Sides are
   scored left to right and a document below 0.02 for a required side is
   not scored for the others (:func:`score_lazily`);
   With ``lexical_weight`` w (default: the weight ``hiera sets tune`` kept,
   else 0) the score is ``(1 − w)·p + w·lead``, ``lead`` the document's
   **lead coverage** of the constraint: the IDF-weighted share of the
   constraint's terms that its title and first sentence state
   (:mod:`hiera.sets.lexical`: a lead sentence says what its subject is);
4. **accept** the documents at or above the threshold: ``threshold`` when
   given, else the classifier's tuned one for the constraint's role
   (``hiera sets tune``: ``positive``, ``conjunct`` for an intersection's
   qualifiers (its sides after the first), ``negative`` for a subtracted constraint, ``query``
   without decomposition; :func:`roles_of`), else its calibrated one;
5. **combine** the accepted sets with :func:`hiera.sets.expr.evaluate_trace`
   following the parsed expression: ∩ keeps documents every side accepted
   (score: the minimum), ∪ any side (the maximum), ``A \\ B`` the members of
   A that B did not accept (score ``a · (1 − b)``, ``b`` B's probability).

Results: ``answer_set`` holds the members' document ids, best first (all of
them, whatever ``k``); the hits are the members in that order, then the other
candidates of the positive constraints ranked by the expression's soft score
(the same formulas over every probability, accepted or not), so Recall@K is
measured on a full ranking. Every hit carries a stage per constraint (its
probability and rank there) and ``set`` (the combined or soft score; a
non-member's ``score`` is capped at the last member's, so the list stays
ordered). Each member hit carries evidence: ``support`` maps every
constraint that accepted it to the sentence of the document that best
supports it — chosen by **token overlap** with the constraint (lower-cased
words without stop words, crude plural stripping; "19th century" also
matches years 18xx, "1990s" years 199x), the document's first sentence when
nothing overlaps — ``evidence`` lists those sentences' passage ids, and
``passage_id``/``text`` are the first of those passages. The trace has ``parse``, ``candidates`` (per
constraint: BM25, dense and union counts), ``classify`` (per constraint:
scored, threshold, accepted members), ``set-algebra`` (members, and each
excluded candidate with the constraints that excluded it) and ``evidence``.

Without a classifier the method still runs, as a retrieval-only baseline:
a constraint's probability is its candidates' reciprocal-rank-fused BM25 and
dense rank divided by the best (so the top candidate scores 1), accepted at
0.8 unless ``threshold`` says otherwise (about the documents in the top 15 of
both lists); the trace says so and how to pass a classifier.
"""

from __future__ import annotations

from typing import Any

from hiera.collection import Collection
from hiera.query import Query, QueryBatch
from hiera.results import Hit, StageScore, TraceStep, timed
from hiera.retrieve.base import BaseRetriever, Found
from hiera.sets.classifier import SetClassifier
from hiera.sets.expr import Expr, atoms, template, to_infix
from hiera.sets.lexical import LEXICAL_EVIDENCE, best_sentence, split_sentences
from hiera.sets.parser import ParseResult
from hiera.sets.plan import Prepared, SetPlan, SetPlanner
from hiera.spec import Level

TRACE_LIMIT = 100  # members / exclusions listed per trace step


class SetsRetriever(BaseRetriever):
    """Parse, retrieve per constraint, classify, combine with set algebra (module docstring).

    The work before thresholds is the :class:`~hiera.sets.plan.SetPlanner`'s;
    this class applies the thresholds, combines the sets and explains them.
    """

    name = "sets"
    filters = True  # every constraint's candidates come from the allowed documents, so every set lies inside it

    def __init__(self, collection: Collection, **defaults: Any) -> None:
        super().__init__(collection, **defaults)
        self.planner = SetPlanner(collection, lambda path: self.classifier(path))  # late-bound: a caller may swap it

    def classifier(self, path: str | None) -> SetClassifier | None:
        """The set classifier at ``path``, loaded once per retriever, or None."""
        return self._load_dir("classifier", path, SetClassifier, "train one with hiera train-classifier")

    def _prepare(self, queries: list[str], params: dict[str, Any]) -> QueryBatch:
        prepared = self.planner.prepare(queries, params)
        return QueryBatch(queries, params, encode_ms=prepared[0].encode_ms if prepared else 0.0, states=prepared)

    def batch_plans(self, queries: list[str], **params: Any) -> list[SetPlan]:
        """The plans of ``queries`` under this retriever's defaults and ``params`` (what ``hiera sets tune`` reads)."""
        p = {**self.defaults, **self._check_params({k: v for k, v in params.items() if v is not None})}
        return self.planner.batch_plans(queries, p)

    # -- search ------------------------------------------------------------------------------
    def _search(self, q: Query, k: int, level: Level, params: dict[str, Any], trace: list[TraceStep]) -> Found:
        prep: Prepared = q.state
        query = q.text
        parse: ParseResult | None = prep.parse
        expr: Expr = prep.expr
        detail: dict[str, Any] = {
            "decompose": params["decompose"],
            "template": template(expr),
            "expression": to_infix(expr),
            "constraints": [a.text for a in atoms(expr)],
        }
        if parse is not None:
            detail.update(parser=parse.parser, notes=list(parse.notes), fallback=parse.fell_back)
            if parse.fallback_from:
                detail["fallback_from"] = parse.fallback_from
        else:
            detail.update(notes=["decompose=false: the whole query is classified as one constraint"], fallback=False)
        trace.append(TraceStep("parse", detail, prep.parse_ms))
        plan = self.planner.plan(query, params, prep, q.filter)
        trace.append(TraceStep("candidates", {"per_constraint": plan.candidates, "candidates": params["candidates"],
                                              "pool": len(plan.pool)}, plan.timings["candidates"]))
        thresholds, source = self.planner.thresholds(params)
        members = plan.members(thresholds)
        cdetail: dict[str, Any] = {"classifier": plan.classifier, "thresholds_from": source, "per_constraint": {}}
        if plan.classifier is not None:
            cdetail["lexical_weight"] = self.planner.retrieval_weight(params)
            cdetail["lexical_evidence"] = LEXICAL_EVIDENCE  # score = (1 − w)·probability + w·lead coverage
        if plan.classifier is None:
            cdetail["note"] = ("no classifier: retrieval scores (RRF of BM25 and dense, divided by the best) stand in "
                               "for probabilities; pass --set classifier=DIR (hiera train-classifier)")
        for text, table in plan.scores.items():
            acc = sorted(members[text].items(), key=lambda kv: (-kv[1], kv[0]))
            cdetail["per_constraint"][text] = {
                "role": plan.roles[text],
                "scored": len(table),
                "threshold": thresholds[plan.roles[text]],
                "accepted": len(acc),
                "members": [d for d, _ in acc[:TRACE_LIMIT]],
            }
        trace.append(TraceStep("classify", cdetail, plan.timings["classify"]))
        with timed(trace, "set-algebra", expression=to_infix(expr)) as step:
            res, ranked, rest = plan.answer(thresholds)
            excluded = sorted(
                res.excluded.items(), key=lambda kv: -max((e.score or 0.0) for e in kv[1]) if kv[1] else 0.0
            )
            step.detail.update(
                members=len(ranked),
                excluded=[
                    {"doc_id": d, "title": plan.titles.get(d, ""),
                     "by": [{"constraint": e.constraint, "kind": e.kind, "score": e.score} for e in why]}
                    for d, why in excluded[:TRACE_LIMIT]
                ],
                excluded_total=len(excluded),
            )
        # a non-member ranks by its soft score, and scores at most the last member (the list stays ordered;
        # its "set" stage keeps the soft score)
        chosen = ([(d, s, True) for d, s in ranked] + [(d, s, False) for d, s in rest])[:k]
        with timed(trace, "evidence", method="token overlap") as step:
            hits = self._hits(plan, chosen, members)
            step.detail["members"] = sum(1 for _, _, m in chosen if m)
        return Found(hits, answer_set=[d for d, _ in ranked])

    def _hits(
        self, plan: SetPlan, chosen: list[tuple[str, float, bool]], members: dict[str, dict[str, float]]
    ) -> list[Hit]:
        ranks = {
            text: {d: i + 1 for i, (d, _) in enumerate(sorted(table.items(), key=lambda kv: (-kv[1], kv[0])))}
            for text, table in plan.scores.items()
        }
        member_docs = [d for d, _, m in chosen if m]
        passages: dict[str, list[tuple[str, str]]] = {}
        by_id = {}
        for _, p in self.col.iter_passages(member_docs):
            by_id[p.id] = p
            passages.setdefault(p.doc_id, []).extend((p.id, s) for s in split_sentences(p.text))
        floor = min((s for _, s, m in chosen if m), default=1.0)
        summaries: dict[str, str] = {}
        others = [d for d, _, m in chosen if not m or d not in passages]
        for r in self.col.iter_docs(others):
            summaries[r.id] = r.summary
            plan.titles.setdefault(r.id, r.title)
        hits: list[Hit] = []
        for i, (d, score, is_member) in enumerate(chosen):
            stages = {
                text: StageScore(float(table[d]), ranks[text][d]) for text, table in plan.scores.items() if d in table
            }
            stages["set"] = StageScore(float(score), i + 1)
            final = float(score) if is_member else min(float(score), floor)
            hit = Hit(rank=i + 1, score=final, doc_id=d, title=plan.titles.get(d, d), stages=stages)
            sents = passages.get(d, [])
            if is_member and sents:
                support: dict[str, str] = {}
                evidence: list[str] = []
                for text in plan.scores:
                    if d not in members[text] or plan.roles[text] == "negative":
                        continue
                    j = best_sentence(text, [s for _, s in sents])
                    support[text] = sents[j][1]
                    if sents[j][0] not in evidence:
                        evidence.append(sents[j][0])
                best = by_id[evidence[0] if evidence else sents[0][0]]
                hit.support, hit.evidence = support, evidence or [best.id]
                hit.passage_id, hit.section_path, hit.text = best.id, best.section_path, best.text
            else:
                hit.text = summaries.get(d, "")
            hits.append(hit)
        return hits


__all__ = ["SetsRetriever"]
