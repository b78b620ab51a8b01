"""The one registry of retrieval methods: typed parameters and requirements, declared once.

Every surface is generated from these declarations, never from a copy:

* ``hiera search … --set NAME=VALUE``, ``hiera eval … --set`` and ``hiera build … --set``
  (build-time defaults), ``hiera tune`` (which parameters it may fit, and their grids);
* ``hiera methods [--json]`` and the HTTP API's ``/methods``;
* the HTTP API's ``/search`` query parameters and their OpenAPI schema;
* the web page's controls (it builds them from ``/methods``).

This module sits at the bottom of the package (like :mod:`hiera.errors`): it
imports no index, model or retriever code, so the CLI can describe every
method without loading FAISS or torch. A method's implementation is named by
a ``module:Class`` string and imported only when a retriever is built.

Spelling rules (the same on every surface, JSON and manifest included):
``lam`` is DHR's λ (``lambda`` is accepted as an alias on input), ``top_docs``
is the number of documents DHR's document stage keeps (the paper's "k1",
accepted as an alias). BM25's saturation parameter is a build option
(``--bm25-k1``), never a method parameter.

Adding a method: see docs/ARCHITECTURE.md, "Adding a method".
"""

from __future__ import annotations

import argparse
import importlib
import math
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from hiera.errors import BadInputError

Level = Literal["passage", "doc"]
ParamType = Literal["int", "float", "str", "bool", "path", "url"]

MAX_K = 1_000  # the one limit on hits per query: library, CLI, API and page
MAX_QUERY_CHARS = 2_000

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


@dataclass(frozen=True)
class Param:
    """One typed method parameter: its bounds, its help and whether ``hiera tune`` fits it."""

    name: str
    type: ParamType
    default: Any
    help: str
    min: float | None = None
    max: float | None = None
    choices: tuple[str, ...] | None = None
    aliases: tuple[str, ...] = ()
    tunable: bool = False
    grid: tuple[Any, ...] = ()  # the values ``hiera tune`` tries when none are given
    choice_requires: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # indexes each choice needs

    def parse(self, value: Any, owner: str = "", given: str | None = None) -> Any:
        """``value`` (typed, or a string from a command line or a URL) checked and converted.

        Raises a one-line :class:`BadInputError` naming the parameter (as the user spelled it).
        """
        who = f"{owner}: " if owner else ""
        spelled = self.name if given in (None, self.name) else f"{given} (= {self.name})"
        shown = value if isinstance(value, str) and value.strip() == value and value else repr(value)
        where = f"{who}parameter {spelled}={shown}"
        try:
            v = self._convert(value)
        except (TypeError, ValueError):
            raise BadInputError(f"{where} must be {self.describe_type()}") from None
        if self.choices is not None and v not in self.choices:
            raise BadInputError(f"{where} must be one of {', '.join(self.choices)}")
        if self.type in ("int", "float"):
            if not math.isfinite(v):
                raise BadInputError(f"{where} must be a finite number")
            if self.min is not None and v < self.min:
                raise BadInputError(f"{where} must be >= {_num(self.min)}")
            if self.max is not None and v > self.max:
                raise BadInputError(f"{where} must be <= {_num(self.max)}")
        if self.type in ("str", "path", "url") and not v:
            raise BadInputError(f"{where} must not be empty")
        if self.type == "url":
            check_url(v, where)
        return v

    def _convert(self, value: Any) -> Any:
        if self.type == "bool":
            if isinstance(value, bool):
                return value
            s = str(value).strip().lower()
            if s in _TRUE:
                return True
            if s in _FALSE:
                return False
            raise ValueError(value)
        if self.type == "int":
            if isinstance(value, bool):
                raise TypeError(value)
            if isinstance(value, float):
                if not value.is_integer():
                    raise ValueError(value)
                return int(value)
            return int(str(value).strip()) if isinstance(value, str) else int(value)
        if self.type == "float":
            if isinstance(value, bool):
                raise TypeError(value)
            return float(str(value).strip()) if isinstance(value, str) else float(value)
        if self.type == "path" and isinstance(value, os.PathLike):
            value = os.fspath(value)  # a pathlib.Path from Python callers, kept as the string every surface shows
        if not isinstance(value, str):
            raise TypeError(value)
        return value.strip()

    @property
    def http(self) -> bool:
        """Settable per request over HTTP: a path or a URL is not (a request must never make the server load files
        or call another server)."""
        return self.type not in ("path", "url")

    def describe_type(self) -> str:
        bounds = ""
        if self.min is not None or self.max is not None:
            lo = _num(self.min) if self.min is not None else "-inf"
            hi = _num(self.max) if self.max is not None else "inf"
            bounds = f" in [{lo}, {hi}]"
        return {
            "int": f"an integer{bounds}",
            "float": f"a number{bounds}",
            "bool": "true or false",
            "str": "a non-empty string" if self.choices is None else f"one of {', '.join(self.choices)}",
            "path": "a directory path",
            "url": "an http(s) URL with a host",
        }[self.type]

    def to_json(self, default: Any = None) -> dict[str, Any]:
        d: dict[str, Any] = {
            "name": self.name,
            "type": self.type,
            "default": self.default if default is None else default,
            "help": self.help,
            "min": self.min,
            "max": self.max,
            "choices": list(self.choices) if self.choices is not None else None,
            "aliases": list(self.aliases),
            "tunable": self.tunable,
            "http": self.http,
        }
        if self.choice_requires:
            d["choice_requires"] = {k: list(v) for k, v in self.choice_requires.items()}
        return d


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else str(x)


@dataclass(frozen=True)
class MethodSpec:
    """A retrieval method (or a reader): what it returns, what it takes, what it needs built."""

    name: str
    impl: str  # "module:Class", imported lazily
    help: str
    levels: tuple[Level, ...] = ("passage", "doc")
    params: tuple[Param, ...] = ()
    requires: tuple[str, ...] = ()  # index kinds: "bm25", "dense"
    kind: Literal["retriever", "reader"] = "retriever"
    loads: tuple[str, ...] = ()  # models it loads at query time besides the encoders: "spacy"

    @property
    def default_level(self) -> Level:
        return self.levels[0]

    def param(self, name: str) -> Param | None:
        for p in self.params:
            if p.name == name or name in p.aliases:
                return p
        return None

    def defaults(self) -> dict[str, Any]:
        return {p.name: p.default for p in self.params}

    def check(self, params: Mapping[str, Any], *, skip_none: bool = True) -> dict[str, Any]:
        """Canonical names and checked values; an unknown name is a one-line error."""
        out: dict[str, Any] = {}
        spelled: dict[str, str] = {}
        for key, value in params.items():
            if value is None and skip_none:
                continue
            p = self.param(key)
            if p is None:
                known = ", ".join(q.name for q in self.params) or "none"
                raise BadInputError(f"{self.kind} {self.name!r} has no parameter {key!r} (known: {known})")
            if p.name in spelled and spelled[p.name] != key:  # lam=1 and lambda=2: which was meant is unknowable
                raise BadInputError(f"{spelled[p.name]!r} and {key!r} are the same parameter of {self.name} "
                                    f"({p.name}); give it once")
            spelled[p.name] = key
            out[p.name] = p.parse(value, self.name, key)
        return out

    def requirements(self, params: Mapping[str, Any] | None = None) -> set[str]:
        """Index kinds needed with these parameter values (a document stage adds its own)."""
        need = set(self.requires)
        for p in self.params:
            if p.choice_requires and params is not None and params.get(p.name) in p.choice_requires:
                need |= set(p.choice_requires[params[p.name]])
        return need

    def load(self) -> type:
        module, _, cls = self.impl.partition(":")
        return getattr(importlib.import_module(module), cls)

    def to_json(self, defaults: Mapping[str, Any] | None = None) -> dict[str, Any]:
        eff = {**self.defaults(), **(defaults or {})}
        return {
            "name": self.name,
            "kind": self.kind,
            "help": self.help,
            "levels": list(self.levels),
            "params": [p.to_json(eff.get(p.name)) for p in self.params],
            "requires": sorted(self.requires),
            "loads": list(self.loads),
        }


# -- document stages ---------------------------------------------------------------
@dataclass(frozen=True)
class DocStageSpec:
    """A DHR document stage: its scorer (``module:Class``, imported when used) and the index kinds it needs.

    Declared here, not where the scorers live, so that a build can refuse a
    stage its indexes cannot serve without importing scorers, and so that the
    stage factory (:func:`hiera.score.docstage.stage`) never imports what a
    stage depends on (``linked`` runs the linking pipeline of :mod:`hiera.link`).
    """

    name: str
    impl: str
    needs: tuple[str, ...]
    # where it runs: every stage on the host (numpy); a stage that is one dense index search also on a torch device,
    # where its documents stay for DHR's passage stage
    backends: tuple[str, ...] = ("numpy",)

    def load(self) -> type:
        module, _, cls = self.impl.partition(":")
        return getattr(importlib.import_module(module), cls)


DOC_STAGES: dict[str, DocStageSpec] = {
    s.name: s
    for s in (
        DocStageSpec("summary", "hiera.score.docstage:Summary", ("dense",), ("numpy", "torch")),
        DocStageSpec("mean", "hiera.score.docstage:Mean", ("dense",), ("numpy", "torch")),
        DocStageSpec("bm25", "hiera.score.docstage:Bm25", ("bm25",)),
        DocStageSpec("passage-max", "hiera.score.docstage:PassageMax", ("dense",)),
        DocStageSpec("bm25-passage-max", "hiera.score.docstage:Bm25PassageMax", ("bm25",)),
        DocStageSpec("hybrid-max", "hiera.score.docstage:HybridMax", ("bm25", "dense")),
        DocStageSpec("fused", "hiera.score.docstage:Fused", ("bm25", "dense")),
        DocStageSpec("doc-hybrid", "hiera.score.docstage:DocHybrid", ("bm25", "dense")),
        # the linking pipeline's documents (dense helps, BM25 is needed)
        DocStageSpec("linked", "hiera.retrieve.linking:LinkedStage", ("bm25",)),
    )
}
DOC_STAGE_NEEDS: dict[str, tuple[str, ...]] = {n: s.needs for n, s in DOC_STAGES.items()}
AUTO_STAGE = "auto"
# What ``auto`` means on a build of the large profile (hiera.index.profile). Measured by bench/scale_real.py on the
# pooled corpus + 20k real-text distractor passages (SQuAD dev, 2,000 questions): the document-level
# ``doc-hybrid`` (BM25 over documents + mean vectors) lost 13.8 points of top-1 to today's default, ``hybrid-max``
# over the large profile's HNSW indexes 0.2 at half flat dense's p50: the large profile keeps ``hybrid-max`` and
# gets its speed from the approximate indexes and the candidate-only passage stage.
LARGE_DOC_STAGE = "hybrid-max"


def resolve_doc_stage(name: str, bm25: bool, dense: bool, profile: str = "small") -> str:
    """``auto`` → the best stage the build serves (``hybrid-max``, or :data:`LARGE_DOC_STAGE` on a large build);
    a named stage is checked against what the build has."""
    if name == AUTO_STAGE:
        if bm25 and dense:
            return LARGE_DOC_STAGE if profile == "large" else "hybrid-max"
        if profile == "large":
            return "bm25" if bm25 else "mean"
        return "bm25-passage-max" if bm25 else "passage-max"
    if name not in DOC_STAGE_NEEDS:
        raise BadInputError(f"unknown document stage {name!r}; known: {', '.join(DOC_STAGE_NEEDS)}")
    have = {k for k, v in (("bm25", bm25), ("dense", dense)) if v}
    missing = sorted(set(DOC_STAGE_NEEDS[name]) - have)
    if missing:
        raise BadInputError(f"document stage {name!r} needs the {' and '.join(missing)} index, which this build lacks")
    return name


# -- shared parameter declarations ---------------------------------------------------
def _depth(help_: str, default: int) -> Param:
    return Param("depth", "int", default, help_, min=1, max=100_000)


DOC_DEPTH = Param(
    "doc_depth", "int", 1000, "doc level: passages ranked first, then grouped by document (deeper when they hold fewer than k documents)",
    min=1, max=100_000,
)


def _untuned(p: Param) -> Param:
    """A shared parameter in a method ``hiera tune`` does not fit (it fits dhr's): not labelled tunable there."""
    return replace(p, tunable=False)


LAM = Param(
    "lam", "float", 1.0, "DHR: weight of the document score in passage score + λ · document score",
    min=0.0, max=100.0, aliases=("lambda",), tunable=True, grid=tuple(round(0.1 * i, 2) for i in range(21)),
)
TOP_DOCS = Param(
    "top_docs", "int", 100, "DHR: documents the document stage keeps before their passages are scored (the paper's k1; k passages come from their passages only)",
    min=1, max=100_000, aliases=("k1",), tunable=True, grid=(10, 20, 50, 100),
)
DOC_STAGE = Param(
    "doc_stage", "str", AUTO_STAGE,
    "DHR: how documents are scored in the first stage (auto: hybrid-max when BM25 and dense are built, else "
    "bm25-passage-max or passage-max; bm25 or mean on a large-profile build with one index)",
    choices=(AUTO_STAGE, *DOC_STAGE_NEEDS), choice_requires=DOC_STAGE_NEEDS,
)
DOC_ALPHA = Param(
    "doc_alpha", "float", 0.35,
    "hybrid document stages (hybrid-max, doc-hybrid): weight of BM25 (1 − doc_alpha weighs dense)",
    min=0.0, max=1.0, tunable=True, grid=tuple(round(0.05 * i, 2) for i in range(21)),
)
PASSAGE_ALPHA = Param(
    "passage_alpha", "float", 0.0,
    "DHR passage stage: weight of the passage's BM25 score (divided by the best among the candidates) "
    "against its dense cosine; 0 is the paper's dense-only stage (needs the BM25 index when > 0)",
    min=0.0, max=1.0, tunable=True, grid=tuple(round(0.1 * i, 1) for i in range(11)),
)

DHR_LAM = 1.75
DHR_PASSAGE_ALPHA = 0.3

# set queries (QUEST): hiera.retrieve.sets
SET_PARSERS = ("rules", "rules+spacy", "endpoint")  # hiera.sets.parser.PARSERS (the tests check they agree)
# the linking pipeline: hiera.retrieve.linking (hiera.link.decompose.DECOMPOSERS; the tests check they agree)
LINK_DECOMPOSERS = ("rules", "none", "endpoint")

METHODS: dict[str, MethodSpec] = {
    s.name: s
    for s in (
        MethodSpec(
            "bm25", "hiera.retrieve.bm25:Bm25Retriever", "flat BM25 over titled passages; documents by their best passage",
            params=(DOC_DEPTH,), requires=("bm25",),
        ),
        MethodSpec(
            "bm25-doc", "hiera.retrieve.bm25:Bm25DocRetriever", "BM25 over whole documents (full text or summary, as built)",
            levels=("doc",), requires=("bm25",),
        ),
        MethodSpec(
            "dense", "hiera.retrieve.dense:DenseRetriever", "flat dense search of the passage index (the DPR baseline)",
            params=(DOC_DEPTH,), requires=("dense",),
        ),
        MethodSpec(
            "dhr", "hiera.retrieve.dhr:DhrRetriever",
            "dense hierarchical retrieval: document stage, then the passages of its top documents",
            # Defaults fitted on SQuAD *train* questions for top-1 (hiera tune, top_docs held at 100 so a query
            # gets its k passages): the hybrid passage stage (passage_alpha 0.3) and λ 1.75. On the 5,696 dev
            # questions of the pooled corpus this beats BM25 at top-1 and hybrid at top-20 (bench/README.md).
            # A build without BM25 falls back to the paper's dense passage stage (DhrRetriever).
            params=(replace(LAM, default=DHR_LAM), TOP_DOCS, DOC_STAGE, DOC_ALPHA,
                    replace(PASSAGE_ALPHA, default=DHR_PASSAGE_ALPHA)),
            requires=("dense",),
        ),
        MethodSpec(
            "dhr-parallel", "hiera.retrieve.dhr:DhrParallelRetriever",
            "parallel DHR: every document scored, fused with the flat passage ranking",
            params=(_untuned(LAM), DOC_STAGE, _untuned(DOC_ALPHA),
                    _depth("passages taken from the flat passage index (at least k)", 1000)),
            requires=("dense",),
        ),
        MethodSpec(
            "hybrid", "hiera.retrieve.hybrid:HybridRetriever", "BM25 and dense passage rankings fused (RRF or interpolation)",
            params=(
                Param("fusion", "str", "rrf", "how the two rankings are combined", choices=("rrf", "interp")),
                Param("alpha", "float", 0.5, "interp: weight of the dense score (1 − alpha weighs BM25)", min=0.0, max=1.0),
                _depth("passage level: passages taken from each ranking before fusion (at least k)", 100),
                DOC_DEPTH,
            ),
            requires=("bm25", "dense"),
        ),
        MethodSpec(
            "bm25-dhr", "hiera.retrieve.dhr:Bm25DhrRetriever", "hierarchical BM25: top documents by BM25, then BM25 over their passages",
            params=(_untuned(LAM), _untuned(TOP_DOCS)), requires=("bm25",),
        ),
        MethodSpec(
            "fetchhr", "hiera.retrieve.fetchhr:FetchHRRetriever",
            "FetchHR: a query vector from every encoder layer (trained heads), each layer fetching its share of "
            "k passages (k_per_layer: a number per layer), none fetched twice, the union ranked; each hit says "
            "which layer found it",
            params=(
                Param("model", "path", None,
                      "fetchhr: directory of heads from hiera train-fetchhr (default: no heads, every layer "
                      "retrieves with its mean-pooled hidden states)"),
                Param("layers", "str", None,
                      "fetchhr: the layers that retrieve, like 1-6 or 1,3,6 (default: every layer with a head)"),
                Param("k_per_layer", "str", None,
                      "fetchhr: passages each layer fetches, one number or one per layer like 5,5,20 "
                      "(default: k split by last_share)"),
                Param("last_share", "float", 0.67,
                      "fetchhr: without k_per_layer, the share of k the last layer fetches; the earlier layers "
                      "split the rest evenly (0: split k evenly over every layer, the paper's Table 1)",
                      min=0.0, max=1.0),
                Param("last_layer", "str", "encoder",
                      "fetchhr: the final encoder layer's query vector: the encoder's own (dense's) or its "
                      "trained head", choices=("encoder", "head")),
                Param("single_layer", "int", None,
                      "fetchhr: retrieve from this layer alone, without exclusion, ranked by its own score",
                      min=1, max=12),
                Param("rank", "str", "encoder",
                      "fetchhr: how the fetched union is ordered: every passage scored by the encoder's own query "
                      "vector (encoder), or by the score of the layer that fetched it (layer: not comparable "
                      "across layers)", choices=("encoder", "layer")),
            ),
            requires=("dense",),
        ),
        MethodSpec(
            "sets", "hiera.retrieve.sets:SetsRetriever",
            "set queries (QUEST): parse into constraints, retrieve and classify each, combine with explicit ∩ ∪ \\; "
            "answer_set = the members, each with its evidence sentences",
            levels=("doc",),
            params=(
                Param("classifier", "path", None,
                      "sets: directory of a set classifier (hiera train-classifier); without one, retrieval scores "
                      "stand in for its probabilities (a baseline)"),
                Param("candidates", "int", 100, "sets: documents BM25 and dense each retrieve per constraint",
                      min=1, max=1000),
                Param("threshold", "float", None,
                      "sets: accept a document for a constraint at this probability (default: the classifier's "
                      "thresholds from hiera sets tune, else its calibrated one)", min=0.0, max=1.0),
                Param("parser", "str", "rules",
                      "sets: the set-expression parser: rules (word lists), rules+spacy (spaCy's tags) or endpoint "
                      "(a model, parser_url)", choices=SET_PARSERS),
                Param("parser_url", "url", None,
                      "sets: an OpenAI-compatible chat-completions URL for parser=endpoint (server-side only; off by "
                      "default; falls back to the rules parser, saying why in the trace, when it fails)"),
                Param("parser_timeout", "float", 10.0, "sets: seconds to wait for the parser endpoint",
                      min=0.1, max=120.0),
                Param("decompose", "bool", True,
                      "sets: false classifies the whole query as one constraint (the paper's baseline)"),
                Param("lexical_weight", "float", None,
                      "sets: weight w of a document's lead coverage of the constraint (the IDF-weighted share of its "
                      "terms that the title and first sentence state) blended into the classifier's probability, "
                      "(1 − w)·p + w·lead (default: the classifier's tuned weight, else 0)",
                      min=0.0, max=1.0),
            ),
            requires=("bm25",),
        ),
        MethodSpec(
            "linking", "hiera.retrieve.linking:LinkingRetriever",
            "interpretable pipeline: entity + event linking and query decomposition → linked documents → "
            "BM25 coarse filter → cross-encoder; every step in the trace (hiera search --explain)",
            params=(
                Param("entity_titles", "int", 10, "linking: documents entity linking of the question keeps",
                      min=0, max=100),
                Param("event_titles", "int", 5,
                      "linking: documents event linking of the question keeps (0: no event linking)", min=0, max=100),
                Param("decomposition_titles", "int", 5,
                      "linking: documents event linking keeps per sub-question or sentence (0: no decomposition "
                      "linking)", min=0, max=100),
                Param("coarse_depth", "int", 200,
                      "linking: passages of the linked documents the BM25 coarse filter keeps for the reranker",
                      min=1, max=10_000),
                Param("link_weight", "float", 0.33,
                      "linking: weight of the document's link score in the coarse order, (1 - w) * BM25/max + "
                      "w * link score (0: BM25 alone; 0.33 measured on HotpotQA dev)", min=0.0, max=1.0),
                Param("reranker", "path", None,
                      "linking: cross-encoder directory (hiera train-reranker) for the fine ranking; without one "
                      "the coarse order stands"),
                Param("hop_slot", "int", 2,
                      "linking: rank by which a passage of a bridge-linked (second-hop) document must appear; the "
                      "best one moves up to it when none is there (0: off)", min=0, max=1000),
                Param("subquestion_slots", "int", 2,
                      "linking: sub-questions that get a seat: the best passage of each of the first N moves up "
                      "to rank 2, 3, ... when it ranks below (0: off)", min=0, max=20),
                Param("decomposer", "str", "rules",
                      "linking: who writes the sub-questions: rules (dependency parse), none, or endpoint "
                      "(decomposer_url)", choices=LINK_DECOMPOSERS),
                Param("decomposer_url", "url", None,
                      "linking: an OpenAI-compatible chat-completions URL for decomposer=endpoint (server-side "
                      "only; off by default; falls back to rules on failure)"),
                Param("decomposer_timeout", "float", 10.0, "linking: seconds to wait for the decomposer endpoint",
                      min=0.1, max=120.0),
            ),
            requires=("bm25",), loads=("spacy",),
        ),
    )
}


# -- readers ------------------------------------------------------------------------------
# A reader turns a retriever's passages into answers (hiera answer, /answer, hiera eval --reader). Its
# parameters live here like a retriever's, so the CLI's --set, /answer's query parameters, /methods and the
# page's answer controls are generated the same way. The reader directory is server-side only (a path).
READERS: dict[str, MethodSpec] = {
    s.name: s
    for s in (
        MethodSpec(
            "extractive", "hiera.read.reader:Reader",
            "extractive reader (hiera train-reader): span + passage-selection heads over the retrieved passages; "
            "identical answers from several passages are merged, their evidence kept",
            levels=("passage",), kind="reader",
            params=(
                Param("reader", "path", None, "reader: directory of a trained reader (hiera train-reader)"),
                Param("max_answer_tokens", "int", 30, "reader: longest answer span, in tokens", min=1, max=200),
                Param("answers", "int", 5, "reader: answers returned, best first", min=1, max=50),
                Param("passage_weight", "float", 1.0,
                      "reader: weight of the passage-selection log-probability in an answer's score "
                      "(0: spans alone; 1: DPR's passage-then-span)", min=0.0, max=10.0, tunable=True,
                      grid=(0.0, 0.5, 1.0, 2.0, 4.0)),
                Param("rank_weight", "float", 0.0,
                      "reader: how much an answer's score falls with its passage's retrieval rank, times "
                      "log(rank), the rank 1-based: keeps the first passages' answer when reading more (a reader's calibrated "
                      "value, in its hiera-reader.json, overrides this default)", min=0.0, max=20.0, tunable=True,
                      grid=(0.0, 0.5, 1.0, 2.0, 4.0, 8.0)),
                Param("part_words", "int", 100,
                      "reader: a passage longer than this many words is read as the parts the corpus splitter "
                      "makes of it (the passage length the reader trained on); 0 reads it whole in token windows",
                      min=0, max=100000),
                Param("merge", "str", "max",
                      "reader: an answer string several passages give scores its best span (max) or the sum of "
                      "their probabilities (sum)", choices=("max", "sum")),
            ),
        ),
    )
}
DEFAULT_READER = "extractive"


def reader_spec(name: str = DEFAULT_READER) -> MethodSpec:
    try:
        return READERS[name]
    except KeyError:
        raise BadInputError(f"unknown reader {name!r}; valid: {', '.join(READERS)}") from None


def method(name: str) -> MethodSpec:
    try:
        return METHODS[name]
    except KeyError:
        raise BadInputError(f"unknown retriever {name!r}; valid: {', '.join(METHODS)}") from None


def method_names() -> tuple[str, ...]:
    return tuple(METHODS)


def all_params() -> dict[str, Param]:
    """Every parameter name across methods; one name has one type and bounds everywhere (checked by the tests)."""
    out: dict[str, Param] = {}
    for s in METHODS.values():
        for p in s.params:
            out.setdefault(p.name, p)
    return out


def check_url(url: str, setting: str) -> str:
    """``url`` when it is an http(s) URL with a host (the scheme in any case), else a one-line
    :class:`BadInputError` naming the ``setting``: the one check of every endpoint URL hiera takes."""
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(url) if isinstance(url, str) else None
    except ValueError:
        parts = None
    if parts is None or parts.scheme.lower() not in ("http", "https") or not parts.hostname:
        raise BadInputError(f"{setting} must be an http(s) URL with a host, got {url!r}")
    return url


def parse_assignments(items: Iterable[str] | None, names: Sequence[str]) -> dict[str, dict[str, Any]]:
    """``--set NAME=VALUE`` / ``--set METHOD.NAME=VALUE`` → checked parameters per method in ``names``.

    An unqualified name applies to every listed method that has it; a name
    none of them has, a bad type or an out-of-bounds value is a one-line error.
    """
    specs = [method(n) for n in names]
    out: dict[str, dict[str, Any]] = {s.name: {} for s in specs}
    spelled: dict[tuple[str, str], str] = {}  # (method, parameter) → the name it was set under
    for item in items or ():
        key, sep, value = str(item).partition("=")
        key = key.strip()
        if not sep or not key:
            raise BadInputError(f"--set takes NAME=VALUE, got {item!r}")
        target, dot, pname = key.rpartition(".")
        if dot:
            if target not in out:
                raise BadInputError(f"--set {key}: {target!r} is not one of the listed retrievers ({', '.join(out)})")
            chosen = [method(target)]
        else:
            pname = key
            chosen = [s for s in specs if s.param(pname) is not None]
        if not chosen or chosen[0].param(pname) is None:
            asked = chosen or specs  # METHOD.NAME asks one method; a bare NAME, every listed one
            have = sorted({p.name for s in asked for p in s.params})
            raise BadInputError(
                f"--set {key}: no parameter {pname!r} in {', '.join(s.name for s in asked)} "
                f"(parameters: {', '.join(have) or 'none'})"
            )
        for s in chosen:
            canonical = s.param(pname).name  # type: ignore[union-attr]
            if spelled.setdefault((s.name, canonical), pname) != pname:
                raise BadInputError(f"--set {spelled[(s.name, canonical)]} and --set {pname} are the same parameter "
                                    f"of {s.name} ({canonical}); give it once")
            out[s.name].update(s.check({pname: value}))
    return out


def methods_json(defaults: Mapping[str, Mapping[str, Any]] | None = None) -> list[dict[str, Any]]:
    """Every retrieval method, then every reader (``"kind": "reader"``), as ``/methods`` lists them."""
    return [s.to_json((defaults or {}).get(s.name)) for s in (*METHODS.values(), *READERS.values())]


def parse_reader_assignments(
    items: Iterable[str] | None, names: Sequence[str], reader: str = DEFAULT_READER
) -> tuple[dict[str, dict[str, Any]], dict[str, Any]]:
    """``--set`` items of a retrieve-then-read command: (retriever parameters per method, reader parameters).

    ``reader.NAME=VALUE`` (or ``extractive.NAME=VALUE``) and names only the
    reader has go to the reader; everything else to the retrievers, exactly
    as :func:`parse_assignments` reads it.
    """
    rspec = reader_spec(reader)
    retr_names = {p.name for n in names for p in method(n).params} | {
        a for n in names for p in method(n).params for a in p.aliases
    }
    to_retrievers: list[str] = []
    read: dict[str, Any] = {}
    for item in items or ():
        key, sep, value = str(item).partition("=")
        target, dot, pname = key.strip().rpartition(".")
        if sep and ((dot and target in ("reader", rspec.name)) or (not dot and rspec.param(key.strip())
                                                                   and key.strip() not in retr_names)):
            pname = pname if dot else key.strip()
            if pname == "reader":
                raise BadInputError("--set reader=…: give the reader directory with --reader")
            read.update(rspec.check({pname: value}))
        else:
            to_retrievers.append(item)
    return parse_assignments(to_retrievers, names), read


def add_set_option(parser: argparse.ArgumentParser, what: str) -> None:
    """``--set NAME=VALUE`` (repeatable): the one way to pass method parameters on every command line.

    Declared here, beside :func:`parse_assignments` that reads it, so that every
    sub-command spells it the same way.
    """
    parser.add_argument(
        "--set", action="append", default=[], metavar="NAME=VALUE",
        help=f"{what}; METHOD.NAME=VALUE targets one method; `hiera methods` lists every parameter",
    )
