"""Name normalization shared by the alias index and the mention detector.

Two spellings of one name must meet at one key: "Beyoncé" and "beyonce",
"Kiss and Tell" and "Kiss & Tell", "The Beatles" and "Beatles". The key is
lower-cased, accent-free, punctuation-free text with single spaces; a
leading article is dropped (a mention's noun chunk keeps it, a title rarely
does). A title's parenthetical qualifier ("Kiss and Tell (1945 film)") is a
disambiguator, not part of the name, so :func:`base_name` removes it.
"""

from __future__ import annotations

import re
import unicodedata

_PUNCT = re.compile(r"[^\w\s]+", re.UNICODE)
_SPACE = re.compile(r"\s+")
_PAREN = re.compile(r"\s*\([^()]*\)\s*$")
_ARTICLE = re.compile(r"^(the|a|an) ")


def fold(text: str) -> str:
    """Lower case, accents removed (NFKD, combining marks dropped)."""
    decomposed = unicodedata.normalize("NFKD", text)
    return "".join(c for c in decomposed if not unicodedata.combining(c)).casefold()


def normalize(text: str) -> str:
    """The lookup key of a name: folded, ``&`` → ``and``, punctuation → space, no leading article."""
    s = fold(text).replace("&", " and ")
    s = _SPACE.sub(" ", _PUNCT.sub(" ", s)).strip()
    return _ARTICLE.sub("", s)


def base_name(title: str) -> str:
    """A title without its trailing parenthetical qualifier: "Kiss and Tell (1945 film)" → "Kiss and Tell"."""
    return _PAREN.sub("", title).strip() or title
