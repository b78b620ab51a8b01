"""``hiera train-classifier``: the set-query relevance classifier, trained with QUEST's recipe.

A cross-encoder from all-MiniLM-L6-v2 scores ``(constraint, document)``
(document = title + text, :func:`hiera.sets.classifier.document_input`);
the model, its calibration and publishing are
:func:`hiera.train.reranker.fit_cross_encoder`'s (seeded, checkpointed and
resumable, ``--max-minutes``, atomic publish, report with wall time and
peak RSS). What is new here is where the labelled pairs come from.

Training units and their labels
-------------------------------
A QUEST-format query gives its gold set ``G`` for the whole expression (its
template over its atoms: ``metadata.atoms`` or the ``<mark>`` spans), not for
each atom. :func:`atom_labels` derives what ``G`` implies for each atom by
walking the expression with three relations between ``G`` and a node ``X``:
``in`` (G ⊆ X), ``out`` (G ∩ X = ∅) and ``within`` (X ⊆ G); the root is
``in`` and ``within`` (G is the answer):

* an atom that is ``in`` gets ``G`` as positives; ``out``: ``G`` as known
  non-members; ``within``: every document outside ``G`` is a non-member, so
  BM25's top results for it that are not in ``G`` are safe hard negatives;
* ``And``: ``in`` passes to every child (nothing else follows);
* ``Or``: ``out`` and ``within`` pass to every child; which child holds a
  gold document is unknown, so with ``or_positives="bm25"`` (default) a gold
  document is a (weak) positive of the alternative whose BM25 score for it
  is clearly highest (:func:`bm25_assigner`), and with ``"none"`` of none;
* ``Diff(L, R)``: ``in`` makes ``L`` ``in`` and ``R`` ``out``.

So "American physicists who were not chemists" teaches that its gold
documents are American physicists and are *not* chemists, and "German or
Italian mathematicians" that BM25's other mathematicians are neither.

Pairs per unit (QUEST: positives replicated to balance; negatives half random,
half from BM25's top results): ``negatives`` negatives — half hard (BM25's
top ``depth`` non-members when the unit has a ``within`` relation, else its
known non-members), the rest random documents not known to be members — and
its positives repeated to the same count. A document labelled both ways by
different queries (noisy gold) is dropped from both. With ``units =
"atoms+queries"`` each whole query is a unit too (``in`` and ``within`` its
gold set), which is what the undecomposed baseline (``sets`` with
``decompose=false``) classifies.

Atom texts: with ``atom_text="parsed"`` (default) an atom takes the text the
set parser gives it ("painters born in the 19th century" where QUEST's
annotation says "born in the 19th century"), when the parser reads the query
with the gold template; that is the text the classifier will see at search
time.

A seeded ``dev_fraction`` of the units is held out to calibrate the pair
threshold (``hiera sets tune`` later picks set-level thresholds on whole
validation queries).
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from tqdm import tqdm

from hiera.builds import open_collection
from hiera.collection import Collection
from hiera.errors import BadInputError, HieraError
from hiera.sets.classifier import document_input
from hiera.sets.expr import And, Atom, Diff, Expr, Or, atoms
from hiera.sets.parser import SetParser, get_parser
from hiera.sets.queries import SetQuery
from hiera.train.args import ClassifierArgs
from hiera.train.common import check_out, digest, holdout, require_training_libs
from hiera.train.reranker import META_FILE as RERANKER_META_FILE
from hiera.train.reranker import fit_cross_encoder

Relation = Literal["in", "out", "within"]


@dataclass
class Labels:
    """What the gold sets say about one unit (an atom's text, or a whole query)."""

    positives: set[str] = field(default_factory=set)  # known members (document ids)
    negatives: set[str] = field(default_factory=set)  # known non-members
    universes: list[set[str]] = field(default_factory=list)  # members lie within each of these
    kind: str = "atom"  # "atom" or "query"

    def merge(self, other: Labels) -> None:
        self.positives |= other.positives
        self.negatives |= other.negatives
        self.universes += other.universes
        if other.kind == "query":
            self.kind = "query"

    def clean(self) -> None:
        """Drop documents labelled both ways (gold sets disagree) and positives outside a universe."""
        both = self.positives & self.negatives
        self.positives -= both
        self.negatives -= both
        for u in self.universes:
            self.positives &= u

    def outside(self, doc: str) -> bool:
        """Known not to be a member: a known negative, or outside some universe."""
        return doc in self.negatives or any(doc not in u for u in self.universes)


def atom_labels(
    expr: Expr, gold: set[str], assign: Callable[[Or, set[str]], dict[int, set[str]]] | None = None
) -> list[tuple[Atom, Labels]]:
    """Per atom of ``expr`` (left to right), what the gold set of the whole expression implies.

    ``assign(or_node, docs)`` may say which child of a union holds which of
    ``docs`` (child index -> documents; see :func:`bm25_assigner`); without it
    the children of a union get no positives.
    """
    out: list[tuple[Atom, Labels]] = []

    def walk(node: Expr, rel: set[Relation], extra: set[str] | None = None) -> None:
        if isinstance(node, Atom):
            lab = Labels()
            if extra:
                lab.positives |= extra
            if "in" in rel:
                lab.positives |= gold
            if "out" in rel:
                lab.negatives |= gold
            if "within" in rel:
                lab.universes.append(set(gold))
            out.append((node, lab))
            return
        if isinstance(node, And):
            for c in node.children:
                walk(c, rel & {"in"})
        elif isinstance(node, Or):
            parts = assign(node, gold) if assign is not None and "in" in rel and "within" in rel else {}
            for i, c in enumerate(node.children):
                walk(c, rel & {"out", "within"}, parts.get(i) if isinstance(c, Atom) else None)
        else:
            assert isinstance(node, Diff)
            walk(node.left, rel & {"in"})
            walk(node.right, {"out"} if "in" in rel else set())

    walk(expr, {"in", "within"})
    return out


def bm25_assigner(col: Collection, margin: float = 1.25) -> Callable[[Or, set[str]], dict[int, set[str]]]:
    """Weak labels for unions: a gold document goes to the alternative whose BM25 score for it is highest.

    Only when that score is at least ``margin`` times the runner-up's ("German
    or Italian mathematicians": Gauss's text says "German"); otherwise the
    document stays unassigned. Alternatives that are not atoms get nothing.
    """
    position = {d.id: i for i, d in enumerate(col.docs_by_position()) if d is not None}

    def assign(node: Or, docs: set[str]) -> dict[int, set[str]]:
        kids = [i for i, c in enumerate(node.children) if isinstance(c, Atom)]
        if len(kids) < 2:
            return {}
        scores = {i: col.bm25_docs.scores(node.children[i].text) for i in kids}  # type: ignore[union-attr]
        out: dict[int, set[str]] = {}
        for d in docs:
            pos = position.get(d)
            if pos is None:
                continue
            ranked = sorted(((float(scores[i][pos]), i) for i in kids), reverse=True)
            (best, i), (second, _) = ranked[0], ranked[1]
            if best > 0 and best >= margin * second:
                out.setdefault(i, set()).add(d)
        return out

    return assign


def resolve_gold(col: Collection, q: SetQuery) -> tuple[set[str], int]:
    """The query's gold titles as document ids (titles and redirects, as the store resolves them), and how many were not found."""
    ids, missing = set(), 0
    for t in q.docs:
        d = col.store.resolve_title(t)
        if d is None:
            missing += 1
        else:
            ids.add(d)
    return ids, missing


def unit_texts(q: SetQuery, parser: SetParser | None) -> tuple[Expr, list[str]]:
    """The gold expression of ``q`` and the text each of its atoms trains under (parsed when aligned)."""
    gold = q.gold_expression()
    texts = [a.text for a in atoms(gold)]
    if parser is not None:
        parsed = parser.parse(q.query)
        ptexts = [a.text for a in atoms(parsed.expression)]
        if parsed.template == q.template and len(ptexts) == len(texts) and not parsed.fallback:
            texts = ptexts
    return gold, texts


def classifier_units(
    col: Collection,
    queries: Sequence[SetQuery],
    units: str = "atoms+queries",
    atom_text: str = "parsed",
    parser: SetParser | None = None,
    or_positives: str = "bm25",
) -> tuple[dict[str, Labels], dict[str, int]]:
    """Labels per unit text over ``queries``, and counts (queries used, gold titles not found, ...)."""
    if atom_text == "parsed" and parser is None:
        parser = get_parser("rules")
    assign = bm25_assigner(col) if or_positives == "bm25" else None
    out: dict[str, Labels] = {}
    stats = {"queries": 0, "skipped": 0, "gold_titles_missing": 0}
    for q in queries:
        gold, missing = resolve_gold(col, q)
        stats["gold_titles_missing"] += missing
        if not gold or not q.template:
            stats["skipped"] += 1
            continue
        try:
            expr, texts = unit_texts(q, parser if atom_text == "parsed" else None)
        except BadInputError:
            stats["skipped"] += 1
            continue
        stats["queries"] += 1
        for (_, lab), text in zip(atom_labels(expr, gold, assign), texts, strict=True):
            out.setdefault(text, Labels()).merge(lab)
        if units == "atoms+queries":
            qlab = Labels(positives=set(gold), universes=[set(gold)], kind="query")
            out.setdefault(q.query, Labels()).merge(qlab)
    for lab in out.values():
        lab.clean()
    return out, stats


class DocTexts:
    """Classifier inputs of documents by id, read from the store once each."""

    def __init__(self, col: Collection) -> None:
        self.col = col
        self._cache: dict[str, str] = {}

    def __call__(self, doc_id: str) -> str:
        text = self._cache.get(doc_id)
        if text is None:
            full = self.col.store.doc_fulltext(doc_id)
            title, _, body = full.partition("\n")
            text = self._cache[doc_id] = document_input(title, body)
        return text


def classifier_pairs(
    col: Collection,
    labels: dict[str, Labels],
    negatives: int,
    seed: int,
    depth: int = 100,
    progress: bool = False,
    texts: DocTexts | None = None,
) -> tuple[list[tuple[str, str]], list[float], dict[str, int]]:
    """Balanced labelled pairs for every unit (see the module docstring), in a seeded order."""
    rng = random.Random(seed)
    texts = texts or DocTexts(col)
    all_ids = [d.id for d in col.store.iter_docs()]
    pairs: list[tuple[str, str]] = []
    ys: list[float] = []
    counts = {"units": 0, "units_without_positives": 0, "bm25_negatives": 0, "known_negatives": 0, "random_negatives": 0}
    for unit in tqdm(sorted(labels), desc="classifier pairs", unit="unit", disable=not progress, leave=False):
        lab = labels[unit]
        n_hard = negatives // 2
        hard: list[str] = []
        if lab.universes:
            pos, _ = col.bm25_docs.search(unit, depth)
            ids = [r.id for r in col.docs_at(pos)]
            hard = [d for d in ids if lab.outside(d) and d not in lab.positives][:n_hard]
            counts["bm25_negatives"] += len(hard)
        if len(hard) < n_hard and lab.negatives:
            known = sorted(lab.negatives - set(hard))
            rng.shuffle(known)
            extra = known[: n_hard - len(hard)]
            hard += extra
            counts["known_negatives"] += len(extra)
        n_neg = max(negatives, len(lab.positives))
        rand: list[str] = []
        seen = set(hard) | lab.positives
        for _ in range(50 * n_neg):
            if len(hard) + len(rand) >= n_neg:
                break
            d = all_ids[rng.randrange(len(all_ids))]
            if d not in seen:
                seen.add(d)
                rand.append(d)
        counts["random_negatives"] += len(rand)
        negs = hard + rand
        counts["units"] += 1
        pos_list = sorted(lab.positives)
        if not pos_list:
            counts["units_without_positives"] += 1
        reps = [pos_list[i % len(pos_list)] for i in range(len(negs))] if pos_list else []
        for d in negs:
            pairs.append((unit, texts(d)))
            ys.append(0.0)
        for d in reps:
            pairs.append((unit, texts(d)))
            ys.append(1.0)
    order = list(range(len(pairs)))
    rng.shuffle(order)
    return [pairs[i] for i in order], [ys[i] for i in order], counts


def split_units(labels: dict[str, Labels], fraction: float, seed: int) -> tuple[dict[str, Labels], dict[str, Labels]]:
    """A seeded ``fraction`` of the units held out (at least one when ``fraction`` > 0 and there are two)."""
    _, held = holdout(sorted(labels), fraction, seed)
    dev = set(held)
    return {n: labels[n] for n in labels if n not in dev}, {n: labels[n] for n in labels if n in dev}


def queries_digest(queries: Sequence[SetQuery]) -> str:
    """What the classifier was trained on, in 16 hex digits (query texts and gold titles, in order)."""
    return digest(q.query + "\x00" + "\x01".join(q.docs) + "\x00" for q in queries)


def train_classifier(
    index: str | Path,
    queries: Sequence[SetQuery],
    out: str | Path,
    args: ClassifierArgs,
    dev_queries: Sequence[SetQuery] | None = None,
    log: Callable[[str], None] = print,
) -> dict[str, Any]:
    """``hiera train-classifier``: units and labels, balanced pairs, BCE training, publish ``out``."""
    args.check()
    check_out(out, RERANKER_META_FILE, "classifier", kind="set-classifier")
    require_training_libs()
    t0 = time.perf_counter()
    if not queries:
        raise BadInputError("no training queries")
    qs = list(queries)
    if args.max_examples is not None and args.max_examples < len(qs):
        keep = sorted(random.Random(args.seed).sample(range(len(qs)), args.max_examples))
        qs = [qs[i] for i in keep]
    col = open_collection(index)
    parser = get_parser("rules") if args.atom_text == "parsed" else None
    labels, stats = classifier_units(col, qs, args.units, args.atom_text, parser, args.or_positives)
    if not any(lab.positives for lab in labels.values()):
        raise HieraError(
            "no training unit has a known member: the queries' gold titles were not found in the collection "
            f"({stats['gold_titles_missing']} titles missing) or no query says which documents satisfy an atom"
        )
    if dev_queries is not None:
        dev_labels, _ = classifier_units(col, dev_queries, args.units, args.atom_text, parser, args.or_positives)
        train_labels = labels
    else:
        train_labels, dev_labels = split_units(labels, args.dev_fraction, args.seed)
    texts = DocTexts(col)
    tp, ty, counts = classifier_pairs(col, train_labels, args.negatives, args.seed, args.depth, args.progress, texts)
    dp, dy, _ = classifier_pairs(col, dev_labels, args.negatives, args.seed + 1, args.depth, args.progress, texts)
    if len(tp) < 2 or not any(ty):
        raise HieraError("fewer than 2 training pairs or no positive pair; give more queries")
    log(
        f"classifier: {len(tp)} training pairs from {counts['units']} units of {stats['queries']} queries, "
        f"{len(dp)} dev pairs"
    )
    report = {
        "kind": "set-classifier",
        "collection": str(col.root),
        "queries_digest": queries_digest(qs),
        "train": {**stats, **counts},
        "dev_units": len(dev_labels),
    }
    return fit_cross_encoder(tp, ty, dp, dy, args, out, report=report, t0=t0, log=log, name="classifier")


__all__ = [
    "DocTexts",
    "Labels",
    "atom_labels",
    "classifier_pairs",
    "classifier_units",
    "queries_digest",
    "resolve_gold",
    "split_units",
    "train_classifier",
    "unit_texts",
]
