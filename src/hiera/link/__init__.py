"""The linking pipeline (Yu, Zhou & Roth): a question → the documents its entities, events and sub-questions name.

One concern per module: ``normalize`` (name keys), ``titles`` (the alias
index), ``spacyload``, ``parsed`` and ``nlp`` (spaCy, loaded once per linker, here or in a
``parse_worker`` child process; the rules read a plain-data parse), ``mentions``, ``entity`` and
``event`` linking, ``decompose`` (the decomposer interface and its registry),
``rules`` and ``endpoint`` (the two decomposers), ``pipeline`` (the
:class:`~hiera.link.pipeline.Linker`). The ``linking`` method that ranks the
linked documents' passages is :mod:`hiera.retrieve.linking`.
"""
