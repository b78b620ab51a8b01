"""hiera: hierarchical retrieval for open-domain question answering.

The package is import-light on purpose: heavy libraries (torch, faiss, bm25s)
are imported by the modules that need them, never here.
"""

__version__ = "0.1.0"
