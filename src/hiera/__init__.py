"""hiera: hierarchical retrieval for open-domain question answering.

The package is import-light on purpose: heavy libraries (torch, faiss, bm25s)
are imported by the modules that need them, never here; importing it only lets
idle OpenMP threads sleep (``OMP_WAIT_POLICY=PASSIVE`` unless set). The names below are
resolved on first use (PEP 562), so ``import hiera`` loads nothing else:

* ``open_collection(root)``: the collection at ``root``, on its live build;
* ``select_documents(root, ids=, titles=, source=, filter=)``: the ids of the
  documents those selectors name, refused in one line if one matches nothing;
* ``remove_documents(root, ids)``: remove them and publish the build without
  them in one transaction (a running ``hiera serve`` answers from it at its
  next search);
* ``add_documents(root, sources, fmt)``: add or replace documents and publish
  the build that serves them in one transaction (``hiera add``).
"""

from typing import Any

from hiera.models import passive_threads
from hiera.version import __version__

# Idle OpenMP threads of FAISS, torch and ONNX Runtime sleep instead of spinning: the runtimes read the setting
# once, when they load, and importing hiera comes before any of them in a program that uses it, so the Python
# API and the adapters search as fast as the CLI (3-4x faster dense and DHR searches on 2 cores). A setting in
# the environment wins.
passive_threads()

__all__ = ["__version__", "add_documents", "open_collection", "remove_documents", "select_documents"]

_LAZY = {"add_documents", "open_collection", "remove_documents", "select_documents"}  # all in hiera.builds


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import hiera.builds

        return getattr(hiera.builds, name)
    raise AttributeError(f"module 'hiera' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | _LAZY)
