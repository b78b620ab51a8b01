"""Answers, not only passages: an extractive reader over retrieved passages.

``features`` turns (question, passage) pairs into model windows (a passage too
long for the model is read in overlapping windows, never cut short);
``decode`` picks answer spans from start/end logits and merges identical
answers; ``model`` is the network (encoder + span head + passage-selection
head) and its files; ``reader`` reads passages into ranked answers;
``pipeline`` is retrieve-then-read with a trace (``hiera answer``, ``/answer``).
Training lives in :mod:`hiera.train.reader`; nothing here imports it.
"""
