"""FetchHR at inference: per-layer retrieval heads (RNets) over a frozen query encoder.

One concern per module: ``layers`` parses which layers retrieve and how many
passages each fetches (no heavy imports), ``rnet`` is the torch module of one
head, ``model`` loads and saves a trained head set and turns questions into one
query vector per layer in one encoder forward pass, ``exclude`` searches a
FAISS index layer after layer without returning a passage twice. The trainer
(``hiera train-fetchhr``) lives in :mod:`hiera.train.fetchhr`; nothing here
imports it.
"""
