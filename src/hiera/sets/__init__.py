"""Set queries (QUEST): entity-seeking queries with implicit intersection, union and difference.

* :mod:`hiera.sets.expr` — the set-expression tree (``Atom``, ``And``, ``Or``,
  ``Diff``), QUEST's template strings, and scored set algebra with a trace of
  which constraint excluded which candidate;
* :mod:`hiera.sets.parser` — natural query -> expression tree (rule-based,
  behind the swappable :class:`~hiera.sets.parser.SetParser` protocol); its
  rules are three layers: :mod:`hiera.sets.tagging` (tokens and what each one
  is: word lists, optionally spaCy's tags), :mod:`hiera.sets.nounphrase` (the
  intersections a category-like phrase implies: "1970s Japanese horror
  films") and :mod:`hiera.sets.grammar` (clauses, coordination, negation
  scope -> the expression); :mod:`hiera.sets.endpoint` is the optional model
  parser and :mod:`hiera.sets.result` what every parser returns;
* :mod:`hiera.sets.queries` — QUEST-format query files in, QUEST-format
  prediction files out, gold titles mapped to document ids;
* :mod:`hiera.sets.lexical` — lexical evidence: how much of a constraint a
  document's lead sentence states, and the sentence that supports a member;
* :mod:`hiera.sets.classifier` — the (constraint, document) classifier at
  inference and its tuned thresholds;
* :mod:`hiera.sets.plan` — the planner: parse, candidates and probabilities
  of a query, before thresholds (what the ``sets`` method and ``hiera sets
  tune`` share);
* :mod:`hiera.sets.tune` — the threshold search.

The ``sets`` method itself is :mod:`hiera.retrieve.sets`; QUEST's official
metrics and ``hiera eval --format quest`` are in :mod:`hiera.eval` (``quest``,
``sets``); the commands in :mod:`hiera.cli.sets`. Nothing here imports a
model at import time; spaCy is used by the parser only when asked for and
installed.
"""
