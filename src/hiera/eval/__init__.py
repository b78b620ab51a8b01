"""Evaluation: answer matching, retrieval/reader metrics and question-set loaders.

Kept import-light on purpose: ``hiera.eval.metrics`` imports ranx (and with
it numba) only when ranking metrics are asked for, so loading questions or
matching answers stays fast.
"""
