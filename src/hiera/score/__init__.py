"""Scoring below the methods: how scores combine (``fusion``) and how documents are scored (``docstage``).

Every method in :mod:`hiera.retrieve`, the linking pipeline and the set
planner combine scores through :mod:`hiera.fusion` and rank documents
through :mod:`hiera.score.docstage`, so these sit below all of them.
"""
