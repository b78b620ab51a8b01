"""Category-like noun phrases: the intersections a phrase implies without saying so.

QUEST's queries are paraphrases of intersected Wikipedia categories, and most
intersections are not put in words: "1970s Japanese horror films" is *1970s
films ∩ Japanese horror films*, "Orchid genera of Brazil" is *Orchid genera ∩
Flora of Brazil*, "Afrotropical birds of Kenya" *Afrotropical birds ∩ Birds of
Kenya*, "War novels about Africa and espionage" three sets. This module reads
one noun phrase (the grammar, :mod:`hiera.sets.grammar`, has already cut off
clauses and "or" lists) into the categories it intersects, each a phrase with
its head noun restored ("1961 novels", "historical novels").

A phrase is ``[pre-modifiers] HEAD [post-modifiers]``. What a word is comes
from :mod:`hiera.sets.tagging` (word lists: genres, realms, heads, ...); the
rules, each with the name ``hiera sets parse --explain`` prints
(:data:`RULES`):

Pre-modifiers are cut into *facets*: a year or decade; a language
("Spanish-language", "English language"); a multi-word name (an author, a
publisher: "Harper & Brothers"); a nationality with the genre words after it
("American teen comedy"); runs of genre words, cut where two genres meet that
do not make one genre together ("comedy musical" is two, "crime comedy" one);
a biogeographic realm ("Afrotropical"); other adjectives.

* For **works** (films, novels, books, ...) every facet is a category
  (``year-facet``, ``language-facet``, ``name-facet``, ``stacked-genres``),
  except that a year joins a nationality or one of the genres Wikipedia files by
  year for novels and books ("2004 German novels", "1968 science fiction
  novels", "2001 children's books": ``year-category``); every post-modifier
  after a pre-modified head is one more ("Italian crime films set in the
  1970s": ``modified-head-and-postmodifier``), and so is each post-modifier
  after the first ("Films set in Africa about war": ``postmodifier-chain``),
  a year phrase included ("films from 1946").
* For **organisms** a place phrase ("of Kenya", "found in Peru", "native to
  Chile") keeps the adjectives that make "ADJ HEAD of PLACE" categories
  (extinct, endemic, geological periods, ...) and every other adjective is a
  category of its own (``adjective-beside-place``: "Flightless birds of New
  Zealand"); a head that has no place categories (genera, species, fruits)
  gives the place its kingdom's head (``head-without-place-categories``:
  "Flora of Brazil"); a growth form ("Shrubs", "Vines") is a category of its
  own beside the place or the use (``growth-form``: "Shrubs used in
  traditional medicine" = *Shrubs ∩ Plants used in traditional medicine*);
  "HEAD endemic to PLACE" is "HEAD of PLACE" ∩ "Endemic flora of PLACE" unless
  the head is generic (``endemic-to``).
* Any other head (people, countries) keeps the older rules: a leading decade
  among several pre-modifiers is a category of its own, and a pre-modified
  head with a participial or topical post-modifier is two.

Every rule that makes an operator records a :class:`RuleUse` (which rule, the
words it read, the atoms it made), so a parse explains itself.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from hiera.sets.expr import Atom
from hiera.sets.tagging import (
    CORE_COMPOUNDS,
    CORE_GENRES,
    DECADE,
    DETS,
    ENDEMIC_HEADS,
    GROWTH_FORMS,
    PLACE_KEEPS,
    PLACE_WORDS,
    RANK_HEADS,
    REALMS,
    TOPICAL_PREPS,
    WORK_HEADS,
    YEAR,
    YEAR_KEEPS,
    TaggedQuery,
    is_demonym,
    is_taxon_head,
    kingdom,
)

Piece = int | str  # a token index, or a glue word not in the query

# The rules that make operators, by name: what `hiera sets parse --explain` prints beside each.
RULES: dict[str, str] = {
    "or-list": "items joined by 'or' (and commas) are a union",
    "and-list": "items joined by 'and' (or 'both ... and') are an intersection; an item missing its head or frame "
    "takes it from its neighbours",
    "have-in-common": "'HEAD X and Y have in common' is HEAD of X ∩ HEAD of Y",
    "year-facet": "a year or decade before the head is a category of its own ('1961 novels')",
    "year-category": "a year with a nationality or a genre filed by year is one category ('2004 German novels')",
    "language-facet": "a language before the head is a category of its own ('English-language films')",
    "name-facet": "a multi-word name before the head (author, publisher) is a category of its own",
    "stacked-genres": "two genres that make no genre together are two categories ('comedy musical films')",
    "modified-head-and-postmodifier": "a pre-modified head with a post-modifier is two categories "
    "('Italian crime films' ∩ 'films set in the 1970s')",
    "postmodifier-chain": "each post-modifier after the first is a category of its own "
    "('films set in Africa' ∩ 'films about war')",
    "adjective-beside-place": "an adjective without 'ADJ HEAD of PLACE' categories is a category beside the place "
    "('Afrotropical birds' ∩ 'birds of Kenya')",
    "head-without-place-categories": "a head with no place categories (genera, species) leaves the place to its "
    "kingdom ('Orchid genera' ∩ 'Flora of Brazil')",
    "growth-form": "a growth form is a category of its own beside the place or use ('Shrubs' ∩ 'Plants used in ...')",
    "endemic-to": "'HEAD endemic to PLACE' is 'HEAD of PLACE' ∩ 'Endemic flora of PLACE'",
    "relative-clause": "a clause after the head ('that are also', 'who were', 'that take place in') adds a category",
    "copula-predicate": "a predicate after the head ('films were released in 2005') adds a category",
    "negated-clause": "a negated clause ('not', 'but not', 'that aren't') is subtracted",
    "excluding": "'excluding', 'except', 'other than' subtract what follows",
    "non-prefix": "'non-X' subtracts 'X HEAD'",
    "negated-items": "several subtracted items are subtracted together (their union)",
    "union-distributes": "a clause after an 'or' list applies to every alternative (QUEST never intersects a union)",
    "endpoint-answer": "the model endpoint's answer (template and atoms), validated (parser=endpoint)",
}

Op = Literal["and", "or", "diff"]


@dataclass(frozen=True)
class RuleUse:
    """One application of a rule: the operator it made, the words it read and the atoms it made."""

    op: Op
    rule: str
    text: str
    atoms: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        return {"op": self.op, "rule": self.rule, "why": RULES.get(self.rule, ""), "read": self.text,
                "atoms": list(self.atoms)}


class Unparsable(Exception):
    """The grammar found no reading of the query; the message says why."""


@dataclass
class NounPhrase:
    """A phrase read into categories, and the frame a bare name after it takes ("birds of" + "Uganda")."""

    atoms: list[Atom]
    frame: list[Piece] | None = None


@dataclass
class _Facet:
    kind: str  # time, language, name, nation, genre, realm, keep, adj
    toks: list[int]
    genre: list[int] | None = None  # a nation's genre words ("American" + "teen comedy")

    @property
    def all(self) -> list[int]:
        return [*self.toks, *(self.genre or [])]


# starters of a year phrase after a head ("films from 1946", "novels published in 1978")
_TIME_STARTERS = {"from", "in", "of", "released", "published", "made", "produced", "during"}
# participles that attach to the head even after a plural noun ("films about dogs shot in Canada")
_HEAD_PARTICIPLES = {
    "set", "shot", "filmed", "released", "published", "described", "directed", "written", "produced", "scored",
    "based", "adapted", "made", "named", "illustrated", "found", "native", "endemic", "distributed", "located",
    "used", "grown", "cultivated", "introduced", "starring", "featuring",
}  # fmt: skip
_PLACE_STARTERS = {"of", "from", "in", "on", *PLACE_WORDS}
# heads of compound nouns: "short story collections" is the head, not "short story" + "collections"
_COMPOUND_HEADS = (("short", "story", "collections"), ("story", "collections"), ("short", "films"))


class PhraseReader(TaggedQuery):
    """A tagged query with the phrase-level rules as methods; :class:`hiera.sets.grammar` adds the clauses."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.notes: list[str] = []
        self.uses: list[RuleUse] = []

    # -- pieces and atoms ------------------------------------------------------------------------------

    def trim(self, idx: list[int]) -> list[int]:
        """Drop punctuation, conjunctions and "both"/"either" at both ends."""
        drop = {",", ";", ":", "and", "or", "both", "either", "nor", "but", "-", "."}
        lo, hi = 0, len(idx)
        while lo < hi and self.low(idx[lo]) in drop:
            lo += 1
        while hi > lo and self.low(idx[hi - 1]) in drop:
            hi -= 1
        return idx[lo:hi]

    def atom(self, pieces: Sequence[Piece]) -> Atom:
        parts: list[str] = []
        spans: list[tuple[int, int]] = []
        run: list[int] = []

        def flush() -> None:
            if run:
                s, e = self.t[run[0]].start, self.t[run[-1]].end
                parts.append(self.q[s:e])
                spans.append((s, e))
                run.clear()

        for p in pieces:
            if isinstance(p, str):
                flush()
                parts.append(p)
            else:
                if run and p != run[-1] + 1:
                    flush()
                run.append(p)
        flush()
        text = " ".join(" ".join(parts).split())
        if not text:
            raise Unparsable("an empty constraint")
        return Atom(text, tuple(spans))

    def words(self, idx: Sequence[Piece]) -> str:
        """The query's text from the first to the last of these tokens (glue words joined when there are any)."""
        ints = [p for p in idx if isinstance(p, int)]
        if ints and len(ints) == len(idx):
            return self.q[self.t[min(ints)].start : self.t[max(ints)].end]
        return " ".join(p if isinstance(p, str) else self.t[p].text for p in idx)

    def use(self, op: Op, rule: str, read: Sequence[Piece], atoms: Sequence[Atom]) -> None:
        self.uses.append(RuleUse(op, rule, self.words(read), tuple(a.text for a in atoms)))

    # -- heads and post-modifiers ----------------------------------------------------------------------

    def _head_index(self, item: list[int]) -> int | None:
        """Position in ``item`` of its head noun: the first plural before any post-modifier.

        A capitalized "-s" word followed by another capitalized word is part of a name ("Jules Verne").
        """
        for k, i in enumerate(item):
            if k > 0 and self.is_starter(i) and not self.is_plural(i, item[0]):
                return None
            if self.is_plural(i, item[0]):
                if (
                    k == 0
                    and k + 1 < len(item)
                    and self.t[i].text[:1].isupper()
                    and self.t[item[k + 1]].text[:1].isupper()
                    and not self.is_prep(item[k + 1])
                ):
                    continue
                return k
        return None

    def _starter_after(self, item: list[int], h: int) -> int | None:
        for k in range(h + 1, len(item)):
            if self.is_starter(item[k]):
                return k
        return None

    def _object_start(self, item: list[int], p: int) -> int:
        """First token of the object after the run of post-modifier words starting at p.

        An "-ing" word right after a preposition is the object ("about mountaineering").
        """
        k = p
        while k < len(item) and (self.is_starter(item[k]) or self.low(item[k]) in ("place", "be")):
            if k > p and self.is_ing(item[k]) and self.is_prep(item[k - 1]):
                break
            k += 1
        return k

    def _is_time(self, seg: list[int]) -> bool:
        """A year phrase: "from 1946", "released in 1978", "from the 1990s"."""
        if not seg or self.low(seg[0]) not in _TIME_STARTERS:
            return False
        rest = [i for i in seg[1:] if self.low(i) not in ("in", "the", "of")]
        return len(rest) == 1 and bool(YEAR.match(self.low(rest[0])) or DECADE.match(self.low(rest[0])))

    def _is_place(self, seg: list[int]) -> bool:
        """A place phrase after an organism: "of Kenya", "found in the Andes", "native to Chile"."""
        if not seg or self.low(seg[0]) not in _PLACE_STARTERS:
            return False
        k = self._object_start(seg, 0)
        obj = [i for i in seg[k:] if self.low(i) not in DETS]
        if not obj:
            return False
        first = self.t[obj[0]].text
        lead_dir = self.low(obj[0]) in ("southern", "northern", "eastern", "western", "central", "tropical")
        return (first[:1].isupper() or (lead_dir and len(obj) > 1)) and not self._is_time(seg)

    def _segments(self, idx: list[int], h: int) -> list[list[int]] | None:
        """The post-modifiers after the head at ``idx[h]``, each a list of token indices; None when
        words that start no post-modifier follow the head (the phrase is then read whole)."""
        p = self._starter_after(idx, h)
        if p is None:
            return [] if h == len(idx) - 1 else None
        between = idx[h + 1 : p]
        if any(not self.t[i].text[:1].islower() or self.is_plural(i, idx[0]) for i in between):
            return None
        starts = [h + 1]
        obj = self._object_start(idx, p)
        for q in range(obj + 1, len(idx)):
            if q < obj:
                continue
            i, prev = idx[q], idx[q - 1]
            w = self.low(i)
            after_and = self.low(prev) in ("and", ",")
            new = False
            if after_and and self.is_starter(i):
                new = True
            elif self.is_prep(prev) or self.is_participle(prev):
                new = False  # the object of the word before: "films based on published ..."
            elif self.is_participle(i) and (w in _HEAD_PARTICIPLES or not self.is_plural(prev, idx[0])):
                new = True
            elif w == "about" and not self.is_starter(prev):
                new = True
            elif w in ("from", "in", "of") and self._is_time(idx[q:]) and not self.cap(prev):
                new = True  # "films from 1946" (but "the War of 1812" is a name)
            elif w == "by" and not self.is_plural(prev, idx[0]):
                new = True  # "novels published in 1963 by ..." (but "works by Stephen King" is one object)
            if new:
                starts.append(q)
                obj = self._object_start(idx, q)
        bounds = [*starts, len(idx)]
        return [self.trim(idx[a:b]) for a, b in zip(bounds, bounds[1:], strict=False) if self.trim(idx[a:b])]

    # -- pre-modifier facets ---------------------------------------------------------------------------

    def _is_genre_word(self, i: int) -> bool:
        w = self.low(i)
        return w in CORE_GENRES or w in ("children's", "young", "teen", "science", "non-fiction") or (
            self.t[i].text[:1].islower() and not DECADE.match(w) and not YEAR.match(w)
        )

    def _facets(self, premods: list[int]) -> list[_Facet]:
        """Cut pre-modifiers into facets (module docstring)."""
        out: list[_Facet] = []
        k, n = 0, len(premods)
        while k < n:
            i = premods[k]
            w = self.low(i)
            if DECADE.match(w) or YEAR.match(w):
                out.append(_Facet("time", [i]))
                k += 1
            elif w.endswith("-language") or (k + 1 < n and self.low(premods[k + 1]) == "language" and self.cap(i)):
                j = k + 1 if w.endswith("-language") else k + 2
                out.append(_Facet("language", premods[k:j]))
                k = j
            elif w in REALMS:
                out.append(_Facet("realm", [i]))
                k += 1
            elif w in PLACE_KEEPS:
                out.append(_Facet("keep", [i]))
                k += 1
            elif self.cap(i) and w not in CORE_GENRES and w != "children's":
                j = k + 1
                while j < n and (
                    (self.cap(premods[j]) and self.low(premods[j]) not in CORE_GENRES and self.low(premods[j]) != "children's"
                     and not self.low(premods[j]).endswith("-language") and not DECADE.match(self.low(premods[j]))
                     and not YEAR.match(self.low(premods[j])) and self.low(premods[j]) not in REALMS)
                    or self.low(premods[j]) in ("&", ".")
                ):  # fmt: skip
                    j += 1
                run = premods[k:j]
                names = [self.t[t].text for t in run if self.low(t) not in ("&", ".")]
                if is_demonym(names):
                    out.append(_Facet("nation", run))
                elif len(names) >= 2:
                    out.append(_Facet("name", run))
                else:
                    out.append(_Facet("genre", run))
                k = j
            else:
                out.append(_Facet("genre", [i]))
                k += 1
        return self._merge_genres(out)

    def _merge_genres(self, facets: list[_Facet]) -> list[_Facet]:
        """Join genre words into genres, cut where two genres meet that make no genre together; a
        nationality takes the genre right after it."""
        out: list[_Facet] = []
        for f in facets:
            prev = out[-1] if out else None
            if f.kind == "genre" and prev is not None and prev.kind in ("genre", "nation", "language", "adj"):
                last = (prev.genre or prev.toks)[-1] if prev.kind == "nation" else prev.toks[-1]
                two_genres = (
                    self.low(last) in CORE_GENRES
                    and self.low(f.toks[0]) in CORE_GENRES
                    and (self.low(last), self.low(f.toks[0])) not in CORE_COMPOUNDS
                )
                if not two_genres and prev.kind == "nation":
                    prev.genre = [*(prev.genre or []), *f.toks]
                    continue
                if not two_genres and prev.kind in ("genre", "language"):
                    prev.toks = [*prev.toks, *f.toks]
                    continue
            out.append(f)
        return out

    # -- the phrase ------------------------------------------------------------------------------------

    def noun_phrase(self, idx: list[int]) -> NounPhrase:
        """One noun phrase (no clause, no "or" list): its categories, intersected."""
        idx = self.trim(idx)
        h = self._head_index(idx)
        if h is None:
            return NounPhrase([self.atom(idx)])
        segs = self._segments(idx, h)
        if segs is None:
            return NounPhrase([self.atom(idx)])
        hd = [idx[h]]
        premods = idx[:h]
        for compound in _COMPOUND_HEADS:  # "short story collections": one head
            n = len(compound) - 1
            words = tuple(self.low(i) for i in [*premods[len(premods) - n :], idx[h]]) if len(premods) >= n else ()
            if words == compound:
                hd, premods = [*premods[len(premods) - n :], idx[h]], premods[: len(premods) - n]
                break
        head_word = self.low(idx[h])
        if head_word in WORK_HEADS:
            return self._work(idx, premods, hd, segs)
        if is_taxon_head(head_word):
            got = self._organism(idx, premods, hd, segs)
            if got is not None:
                return got
        return self._other(idx, premods, hd, segs)

    def _chain(self, idx: list[int], base: list[Piece], hd: list[int], segs: list[list[int]], rule: str) -> list[Atom]:
        """The base category, then one per post-modifier, recorded under ``rule``."""
        atoms = [self.atom(base)]
        more = [self.atom([*hd, *s]) for s in segs]
        if more:
            self.use("and", rule, idx, more)
        return atoms + more

    def _work(self, idx: list[int], premods: list[int], hd: list[int], segs: list[list[int]]) -> NounPhrase:
        facets = self._facets(premods)
        origin = next((s for s in segs if self.low(s[0]) == "from" and self._is_place(s)), None)
        if origin is not None and len(facets) <= 1:
            # "Horror films from Thailand" is Wikipedia's "Thai horror films": one category
            segs = [s for s in segs if s is not origin]
            if facets:
                facets[0].toks = [*facets[0].toks, *hd[:-1]]
                facets[0].genre = [*(facets[0].genre or []), hd[-1], *origin]
                hd_for = None
            else:
                hd_for = [*hd, *origin]
            if not segs and not facets:
                return NounPhrase([self.atom(idx)], self._frame(hd, origin))
            if hd_for is not None:
                atoms = self._chain(idx, hd_for, hd, segs, "postmodifier-chain")
                return NounPhrase(atoms, self._frame(hd, origin))
        merged, facets, segs = self._year_category(facets, segs, hd)
        atoms: list[Atom] = []
        if merged is not None:
            atoms.append(self.atom(merged))
        made = {id(f): self.atom(self._facet_pieces(f, hd)) for f in facets}
        atoms += made.values()
        if not atoms and not segs:
            return NounPhrase([self.atom(idx)])
        if not atoms:  # a bare head: its first post-modifier belongs to it ("Novels set in the 1900s")
            atoms = self._chain(idx, [*hd, *segs[0]], hd, segs[1:], "postmodifier-chain")
            return NounPhrase(atoms, self._frame(hd, segs[0]))
        if len(atoms) > 1:
            for f in facets:
                rule = {"time": "year-facet", "language": "language-facet", "name": "name-facet"}.get(f.kind, "stacked-genres")
                self.use("and", rule, idx, [made[id(f)]])
            if merged is not None:
                self.use("and", "year-category", idx, atoms[:1])
        more = [self.atom([*hd, *s]) for s in segs]
        if more:
            self.use("and", "modified-head-and-postmodifier", idx, more)
        frame = self._frame(hd, segs[-1]) if segs else None
        return NounPhrase(atoms + more, frame)

    def _year_category(
        self, facets: list[_Facet], segs: list[list[int]], hd: list[int]
    ) -> tuple[list[Piece] | None, list[_Facet], list[list[int]]]:
        """A year that is one category with a nationality or genre ("2004 German novels", "fantasy
        novels from 1972"): those pieces, and the facets and post-modifiers left."""
        keeps = YEAR_KEEPS.get(self.low(hd[-1]))
        year = next((f for f in facets if f.kind == "time" and YEAR.match(self.low(f.toks[0]))), None)
        times = [s for s in segs if self._is_time(s) and YEAR.match(self.low(s[-1]))]
        if keeps is None or (year is None and not times):
            return None, facets, segs
        nation = next((f for f in facets if f.kind == "nation"), None)
        genre = next((f for f in facets if f.kind == "genre" and self.words(f.toks).lower() in keeps), None)
        partner = nation or genre
        if partner is None:
            return None, facets, segs
        facets = list(facets)
        if partner.genre:  # "2006 American war novels": the nationality goes with the year, "war" stays a genre
            facets.insert(facets.index(partner) + 1, _Facet("genre", partner.genre))
        facets.remove(partner)
        if year is not None:
            facets.remove(year)
            return [*year.toks, *partner.toks, *hd], facets, segs
        return [*partner.toks, *hd, *times[0]], facets, [s for s in segs if s is not times[0]]

    def _facet_pieces(self, f: _Facet, hd: list[int]) -> list[Piece]:
        """A facet with its head: "Japanese horror" + "films"; a nationality given as "from X" comes after it."""
        if f.genre and hd[-1] in f.genre:  # "Horror" + "films from Thailand"
            return [*f.toks, *f.genre]
        return [*f.all, *hd]

    def _frame(self, hd: list[int], seg: list[int]) -> list[Piece]:
        """The words a bare name after this post-modifier takes ("novels set in" + "Paris")."""
        return [*hd, *seg[: self._object_start(seg, 0)]]

    def _organism(self, idx: list[int], premods: list[int], hd: list[int], segs: list[list[int]]) -> NounPhrase | None:
        """Organisms with a place or a use (module docstring); None when no rule of theirs applies."""
        head_word = self.low(hd[-1])
        places = [s for s in segs if self._is_place(s)]
        place = places[0] if places else None
        rest = [s for s in segs if s is not place]
        facets = self._facets(premods)
        king = kingdom([self.t[i].text for i in [*premods, *hd]]) or "Flora"
        obj = place[self._object_start(place, 0) :] if place is not None else []
        atoms: list[Atom] = []
        frame: list[Piece] | None = None
        if head_word in GROWTH_FORMS and (place is not None or rest):
            atoms.append(self.atom(hd))
            for f in facets:
                atoms.append(self.atom([*f.all, *hd]))
            made: list[Atom] = []
            if place is not None:
                frame = [f"{king} of"]
                made.append(self.atom([*frame, *obj]))
            made += [self.atom(["Plants", *s]) for s in rest]
            self.use("and", "growth-form", idx, [atoms[0], *made])
            return NounPhrase(atoms + made, frame)
        if place is None:
            return None
        endemic = self.low(place[0]) == "endemic"
        if head_word in RANK_HEADS and premods and not any(f.kind == "keep" for f in facets):
            atoms.append(self.atom([*premods, *hd]))
            frame = [f"{kingdom([self.t[i].text for i in premods]) or king} of"]
            made = [self.atom([*frame, *obj])]
            self.use("and", "head-without-place-categories", idx, made)
        elif endemic and head_word not in ENDEMIC_HEADS:
            frame = [*hd, "of"]
            atoms.append(self.atom([*premods, *hd, "of", *obj]))
            made = [self.atom([f"Endemic {king.lower()} of", *obj])]
            self.use("and", "endemic-to", idx, made)
        else:
            keep = [i for f in facets if f.kind == "keep" for i in f.all]
            # a rank's modifiers name its group ("Invasive plant species in Japan"): never a category apart
            split = [f for f in facets if f.kind != "keep"] if head_word not in RANK_HEADS else []
            if not split:
                if not rest:
                    return NounPhrase([self.atom(idx)], self._frame(hd, place))
                base = [*premods, *hd, *place]
                return NounPhrase(self._chain(idx, base, hd, rest, "postmodifier-chain"), self._frame(hd, place))
            made = [self.atom([*f.all, *hd]) for f in split]
            atoms.append(self.atom([*keep, *hd, *place]))
            frame = self._frame(hd, place)
            self.use("and", "adjective-beside-place", idx, made)
            atoms = made + atoms
            made = []
        more = [self.atom([*hd, *s]) for s in rest]
        if more:
            self.use("and", "postmodifier-chain", idx, more)
        return NounPhrase(atoms + made + more, frame)

    def _other(self, idx: list[int], premods: list[int], hd: list[int], segs: list[list[int]]) -> NounPhrase:
        """People, countries, anything else: the rules the vital-sets phrasings were written for."""
        head = hd[-1]
        if len(segs) > 1:
            first_end = len(idx) - sum(len(s) for s in segs[1:])
            cut = idx[:first_end]
            later = segs[1:]
            # a later participial or "about" phrase (not a place) is a category of its own
            if all(self.is_participle(s[0]) or self.low(s[0]) == "about" for s in later) and not any(
                self.low(s[0]) in PLACE_WORDS for s in later
            ):
                first = self._other(cut, premods, hd, segs[:1])
                more = [self.atom([head, *s]) for s in later]
                self.use("and", "postmodifier-chain", idx, more)
                return NounPhrase(first.atoms + more, first.frame)
        h = idx.index(head)
        p = self._starter_after(idx, h)
        mods = self._decade_facet(premods, head)
        if (
            premods
            and p == h + 1
            and (self.low(idx[p]) in TOPICAL_PREPS or self.is_participle(idx[p]) or self.is_ing(idx[p]))
            and self.low(idx[p]) not in PLACE_WORDS
        ):
            # "German composers born in the 18th century": the pre-modified head and "composers born in ..."
            more = self.atom([head, *idx[p:]])
            self.use("and", "modified-head-and-postmodifier", idx, [more])
            if len(mods) > 1:
                self.use("and", "year-facet", idx, mods[:1])
            return NounPhrase([*mods, more], self._frame([head], idx[p:]))
        if len(mods) > 1:
            self.use("and", "year-facet", idx, mods[:1])
            return NounPhrase([mods[0], self.atom(idx[1:])])
        return NounPhrase([self.atom(idx)], self._frame([head], idx[p:]) if p is not None else None)

    def _decade_facet(self, premods: list[int], head: int) -> list[Atom]:
        """A leading decade among several pre-modifiers is its own constraint."""
        if len(premods) >= 2 and DECADE.match(self.low(premods[0])):
            return [self.atom([premods[0], head]), self.atom([*premods[1:], head])]
        if premods:
            return [self.atom([*premods, head])]
        return [self.atom([head])]
