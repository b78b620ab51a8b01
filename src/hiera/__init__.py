"""hiera: hierarchical retrieval for open-domain question answering.

The package is import-light on purpose: heavy libraries (torch, faiss, bm25s)
are imported by the modules that need them, never here. ``open_collection``
is resolved on first use (PEP 562), so ``import hiera`` loads nothing else.
"""

from typing import Any

from hiera.version import __version__

__all__ = ["__version__", "open_collection"]


def __getattr__(name: str) -> Any:
    if name == "open_collection":
        from hiera.builds import open_collection

        return open_collection
    raise AttributeError(f"module 'hiera' has no attribute {name!r}")
