"""The clause grammar of the rule-based set parser: tagged tokens -> a set expression.

:mod:`hiera.sets.tagging` says what each token is (a preposition, a plural
noun, a negation cue, an "and" that is part of a name); this module decides
what the query means from those answers: where the main noun phrase ends and
clauses begin, what a negation's scope is, which items of a list share a
head or a frame, and how the parts combine into ∩ ∪ \\. What a token is
comes from the tagging layer (the word classes of :class:`TaggedQuery` and
its public word lists); the rules name only the function words they are built
around ("and", "or", "other than", "have in common"). So a vocabulary fix
never edits a rule here, and the rules read without the vocabulary in the
way. :mod:`hiera.sets.parser` wires the two together behind the
:class:`~hiera.sets.parser.SetParser` protocol and turns :class:`Unparsable`
into its one-constraint fallback.

How :class:`~hiera.sets.parser.RuleSetParser` reads a query
-----------------------------------------------------------
Tokens keep their character offsets, so every atom knows the pieces of the
query it was built from (:attr:`Atom.span`); an atom's text is those pieces
joined, in the order the constraint reads.

1. A leading question ("what are the", "list of", "which") and final
   punctuation are dropped.
2. "HEAD [that] X, Y and Z have in common" (also "HEAD common to / shared by
   X and Y") is the intersection of "HEAD of X", "HEAD of Y", ...
3. The query is cut at clause markers into a main noun phrase and clauses:
   relative clauses ("that are also", "who were", "which are not", "that
   can't be", "that take place ..."), a copula right after the head noun
   ("horror films were released in 2005"), negations ("not", "but not", ", not",
   "excluding", "except", "other than") and "and also" / "but also". A
   clause whose marker holds a negation is negative.
4. A bare plural head whose first clause only describes it ("Novels that
   take place in Edinburgh", "moths are found in Japan") is one category: the
   clause joins the main phrase.
5. The main noun phrase:

   * "non-X ..." subtracts "X HEAD" from the rest ("Non-endemic reptiles of
     Cuba" subtracts "endemic reptiles of Cuba": an adjective with place
     categories keeps the place);
   * an "or" list (commas and "or") is a union; an "and" between named items
     ("Chile and Peru", "the Atlantic Ocean and Colombia") or anywhere after
     the head ("Novels about Africa and espionage", "Films directed by X and
     scored by Y") an intersection. Items missing their shared part are
     completed from their neighbours: an item lacking a plural head noun that
     *follows* an item with a head and a post-modifier takes that item's frame
     up to its last post-modifier ("Novels set in Nanjing, Hebei" -> "Novels
     set in Hebei"); a participial item takes the head alone ("Films set in
     Mumbai, shot in London"); one that *precedes* an item with a head takes
     that item's head ("Dutch or Swiss war films" -> "Dutch war films"); bare
     plural heads before an item with a prepositional phrase take that phrase
     ("Moths or Insects or Arthropods of Guadeloupe"); a lowercase item parallel
     to an earlier object continues it ("films about painters, sculptors or
     architects"). Each item of an "and" list is then read as a phrase, and
     the categories of all of them intersected, each once;
   * otherwise the phrase is read by :mod:`hiera.sets.nounphrase` into the
     categories it implies (years, languages, names, stacked genres, places of
     organisms, post-modifiers), which also gives the frame a bare name in a
     later clause takes ("Afrotropical birds of Kenya but not Uganda" ->
     "birds of Uganda").

6. Clauses are split into items at "and"/"," ("that are also both X and
   Y"); an item that is a noun phrase with a plural head ("dancers", "Birds
   of Peru") is a constraint as it stands; a prepositional or participial
   item is attached to the main head ("not about cricket" -> "films about
   cricket"), reusing the main phrase's own frame when it has the same
   preposition ("Birds found in the Venezuelan Andes but not in Colombia" ->
   "Birds found in Colombia"); a bare name takes the main phrase's frame in
   place of its object ("Flora of Colombia but not Peru" -> "Flora of Peru");
   an adjective or a nationality gets the head after it ("that are extinct" ->
   "extinct Animals", "that aren't French" -> "French films"); a verb clause
   keeps its relative pronoun, and "take place in" reads Wikipedia's "set in"
   ("Teen movies that take place in California" -> "movies set in
   California"); "those" / "ones" stand for the head ("excluding those by X").
7. Positive parts are intersected and negative parts subtracted. QUEST's
   templates never intersect a union, so positive clauses after an "or" list
   are folded into every alternative ("Animals from Cuba or Jamaica that are
   extinct" = "Animals from Cuba that are extinct" ∪ "Animals from Jamaica that
   are extinct").

A query no rule reads (nothing before a negation, an empty clause) raises
:class:`Unparsable`; the parser then reads it as one constraint, template
``_``, with a note saying why.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from hiera.sets.expr import And, Atom, Diff, Expr, Or
from hiera.sets.nounphrase import RULES, PhraseReader, Piece, RuleUse, Unparsable
from hiera.sets.tagging import (
    AUX,
    DETS,
    EXCLUDE,
    NEG,
    PLACE_KEEPS,
    QUESTION_FILLERS,
    QUESTION_PREFIXES,
    REL,
    Tag,
    Tok,
    is_demonym,
)

__all__ = ["RULES", "RuleUse", "Unparsable", "read"]


@dataclass
class _Clause:
    negative: bool
    marker: list[int]  # token indices of the marker words
    body: list[int]  # token indices of the content
    copula: bool  # the marker holds a form of "be" (or none is needed: "not", "excluding")


@dataclass
class _Parsed:
    pos: list[Expr] = field(default_factory=list)
    neg: list[Expr] = field(default_factory=list)


class _Run(PhraseReader):
    """One query being parsed: its tagged tokens, and the rules as methods.

    It extends :class:`~hiera.sets.nounphrase.PhraseReader` (itself a
    :class:`~hiera.sets.tagging.TaggedQuery`) rather than holding one, so a rule
    asks ``self.is_plural(i, start)`` just as it calls one of the grammar's own steps.
    """

    def __init__(self, query: str, toks: list[Tok], tags: dict[int, Tag]) -> None:
        super().__init__(query, toks, tags)
        self.frame_prefix: list[Piece] | None = None  # what a bare name in a clause takes ("birds of")

    # -- the steps ------------------------------------------------------------------------------

    def parse(self) -> tuple[Expr, list[str]]:
        idx = self._strip_question(list(range(len(self.t))))
        if not idx:
            raise Unparsable("no words")
        if self.low(idx[0]) in NEG or self.low(idx[0]) in EXCLUDE:
            raise Unparsable("it starts with a negation, so there is nothing to subtract from")
        common = self._have_in_common(idx)
        if common is not None:
            return common, self.notes
        main, clauses = self._clauses(idx)
        main = self.trim(main)
        if not main:
            raise Unparsable("nothing before the first clause marker")
        if clauses and self._describes_bare_head(main, clauses[0]):
            # "Novels that take place in Edinburgh", "moths are found in Japan": one category
            cl = clauses.pop(0)
            main = [*main, *self._clause_pieces(cl)]
        parsed = self._main(main)
        head = self._head(main)
        frame_src = self._frame_source(main)
        folded: list[Sequence[Piece]] = []
        for cl in clauses:
            body = self.trim(cl.body)
            if not body:
                raise Unparsable(f"an empty clause after {' '.join(self.t[i].text for i in cl.marker)!r}")
            if not cl.negative and len(parsed.pos) == 1 and isinstance(parsed.pos[0], Or):
                folded.append([*cl.marker, *body])
                continue
            exprs = self._clause_items(cl, body, head, frame_src)
            if cl.negative:
                neg = exprs[0] if len(exprs) == 1 else Or(exprs)
                parsed.neg.append(neg)
                rule = "excluding" if any(self.low(i) in EXCLUDE or self.low(i) in ("other", "apart", "aside")
                                          for i in cl.marker) else "negated-clause"
                self.use("diff", rule, [*cl.marker, *body], exprs)
                if len(exprs) > 1:
                    self.use("or", "negated-items", body, exprs)
            else:
                parsed.pos.extend(exprs)
                rule = "copula-predicate" if not any(self.low(i) in REL for i in cl.marker) else "relative-clause"
                self.use("and", rule, [*cl.marker, *body], exprs)
                if len(exprs) > 1:
                    self.use("and", "and-list", body, exprs)
        if folded:
            parsed.pos[0] = self._fold(parsed.pos[0], folded)
            self.use("or", "union-distributes", [p for seg in folded for p in seg], list(parsed.pos[0].children))
        return self._combine(parsed), self.notes

    def _describes_bare_head(self, main: list[int], cl: _Clause) -> bool:
        """Is ``cl`` a descriptive clause ("that take place in", "are found in") of a bare plural head?"""
        if cl.negative or len(main) != 1 or not self.is_plural(main[0], main[0]):
            return False
        if any(self.low(i) in ("also", "both") for i in cl.marker):
            return False
        body = self.trim(cl.body)
        if not body:
            return False
        first = body[0]
        if self.is_plural(first, first) and not self.is_starter(first):
            return False  # "Books that are memoirs": a second category
        return self.is_starter(first) or not cl.copula

    def _clause_pieces(self, cl: _Clause) -> list[int]:
        """The words of a descriptive clause as part of the phrase: "found in Japan", "that take place in X"."""
        body = self.trim(cl.body)
        if self.is_starter(body[0]):
            return body
        return [*[i for i in cl.marker if self.low(i) in REL], *body]

    def _strip_question(self, idx: list[int]) -> list[int]:
        while idx and self.low(idx[-1]) in ("?", ".", "!"):
            idx = idx[:-1]
        lows = [self.low(i) for i in idx]
        for prefix in QUESTION_PREFIXES:
            n = len(prefix)
            if tuple(lows[:n]) == prefix and len(idx) > n:
                idx = idx[n:]
                while len(idx) > 1 and self.low(idx[0]) in QUESTION_FILLERS:
                    idx = idx[1:]
                self.notes.append(f"question words {' '.join(prefix)!r} dropped")
                break
        return idx

    # "HEAD [that] X, Y and Z have in common" / "HEAD common to X and Y" / "HEAD shared by X and Y"
    def _have_in_common(self, idx: list[int]) -> Expr | None:
        lows = [self.low(i) for i in idx]
        n = len(lows)
        body: list[int] | None = None
        head_end = None
        for k in range(n - 2):
            if lows[k] in ("have", "has", "share") and lows[k + 1 : k + 3] == ["in", "common"] and k + 3 == n:
                head_end = max(self._first_plural(idx[:k]), 0) + 1
                body = idx[head_end:k]
        if body is None:
            for k in range(1, n - 1):
                if (lows[k], lows[k + 1]) in (("common", "to"), ("shared", "by"), ("shared", "between")):
                    head_end = k
                    body = idx[k + 2 :]
                    break
        if body is None or head_end is None:
            return None
        head = idx[:head_end]
        body = [i for i in body if self.low(i) not in ("that", "which", "all", "both")]
        items = [it for it in self._split(body, {"and", ","}) if it]
        if len(items) < 2 or not head:
            return None
        atoms = [self.atom([*head, "of", *it]) for it in items]
        self.use("and", "have-in-common", idx, atoms)
        return And(atoms)

    def _first_plural(self, idx: list[int]) -> int:
        for k, i in enumerate(idx):
            if self.is_plural(i, idx[0]):
                return k
        return -1

    def _clauses(self, idx: list[int]) -> tuple[list[int], list[_Clause]]:
        """Cut at clause markers: the main phrase and the clauses after it."""
        main: list[int] | None = None
        clauses: list[_Clause] = []
        current: list[int] = []
        k = 0
        n = len(idx)
        while k < n:
            m = self._marker(idx, k) if k > 0 else None
            if m is None:
                current.append(idx[k])
                k += 1
                continue
            negative, length, copula = m
            if main is None:
                main = current
            else:
                clauses[-1].body = current
            clauses.append(_Clause(negative, idx[k : k + length], [], copula))
            current = []
            k += length
        if main is None:
            return current, []
        clauses[-1].body = current
        return main, clauses

    def _marker(self, idx: list[int], k: int) -> tuple[bool, int, bool] | None:
        """A clause marker starting at ``idx[k]``: ``(negative, length, copula)`` or None.

        ``[,] [and|but|yet] (that|who|which) [aux|not|also|both]*``, ``[,] [and|but|yet] [aux] not
        [...]``, ``and also`` / ``but also``, ``excluding``, ``except [for]``, ``other than``,
        ``apart from``. ``copula`` says whether the clause is predicated with "be" (or needs no
        verb); a bare relative pronoun starts a verb clause ("that take place in Vietnam").
        """
        lows = [self.low(i) for i in idx]
        n = len(lows)
        j = k
        if lows[j] == ",":
            j += 1
        connector = j < n and lows[j] in ("and", "but", "yet", "though")
        if connector:
            j += 1
        if j >= n:
            return None
        w = lows[j]
        nxt = lows[j + 1] if j + 1 < n else ""
        if w in EXCLUDE or (w, nxt) in (("other", "than"), ("apart", "from"), ("aside", "from")):
            j += 2 if nxt in ("for", "than", "from") else 1
            return True, j - k, True
        rel = w in REL
        # "Japanese horror films were released in 2005": a copula right after the head noun
        predicate = j == k and w in ("are", "were", "is", "was") and self.is_plural(idx[k - 1], idx[0])
        if rel:
            j += 1
        negative = copula = also = False
        while j < n and (lows[j] in AUX or lows[j] in NEG or lows[j] in ("also", "both")):
            negative |= lows[j] in NEG
            copula |= lows[j] in AUX or lows[j] in NEG
            also |= lows[j] == "also"
            j += 1
        if rel or negative or predicate or (also and connector):
            return negative, j - k, copula or not rel
        return None

    # -- the main phrase ---------------------------------------------------------------------------

    def _main(self, idx: list[int]) -> _Parsed:
        out = _Parsed()
        non = [k for k, i in enumerate(idx) if self.low(i) == "non-" and k + 1 < len(idx)]
        if non:
            k = non[0]
            negated = idx[k + 1]
            rest = idx[:k] + idx[k + 2 :]
            if not rest:
                raise Unparsable("nothing but a non- word")
            head = self._head(rest)
            pieces: list[Piece] = [negated, *head]
            if self.low(negated) in PLACE_KEEPS:  # "Non-endemic reptiles of Cuba": endemic reptiles *of Cuba*
                place = self._place_of(rest)
                pieces += place
            neg = self.atom(pieces)
            out.neg.append(neg)
            self.use("diff", "non-prefix", idx[k : k + 2], [neg])
            idx = rest
        if any(self.low(i) == "or" for i in idx):
            items = self._split(idx, {"or", ",", "nor"})
            expr = self._list(items, Or)
            out.pos.append(expr)
            if isinstance(expr, Or):
                self.use("or", "or-list", idx, list(expr.children))
            return out
        if self._and_list(idx):
            items = self._split(idx, {"and", ","})
            if len(items) > 1:
                out.pos.extend(self._and_items(idx, items))
                return out
        np = self.noun_phrase(idx)
        self.frame_prefix = np.frame
        out.pos.extend(np.atoms)
        return out

    def _place_of(self, idx: list[int]) -> list[int]:
        """The place phrase after the head of ``idx`` ("of Cuba"), or nothing."""
        h = self._head_index(idx)
        if h is None:
            return []
        segs = self._segments(idx, h) or []
        return next((s for s in segs if self._is_place(s)), [])

    def _and_list(self, idx: list[int]) -> bool:
        """Does an "and" (not one inside a name) join parts of this phrase?

        Between named items ("Chile and Peru", "the Atlantic Ocean and Colombia") as before, and
        now anywhere after the head: "Novels about Africa and espionage", "Flora of Sri Lanka and
        southern India", "Films directed by X and scored by Y".
        """
        if self._named_and(idx):
            return True
        h = self._head_index(idx)
        if h is None:
            return False
        return any(self.low(i) == "and" and i not in self.protected and k > h for k, i in enumerate(idx))

    def _and_items(self, idx: list[int], items: list[list[int]]) -> list[Expr]:
        """An "and" list: each item completed from its neighbours, read as a phrase, the categories united."""
        done = self._complete(items)
        atoms: dict[str, Atom] = {}
        frame: list[Piece] | None = None
        for pieces in done:
            if all(isinstance(p, int) for p in pieces):
                np = self.noun_phrase([p for p in pieces if isinstance(p, int)])
                frame = frame or np.frame
                got = np.atoms
            else:
                got = [self.atom(pieces)]
            for a in got:
                atoms.setdefault(a.text, a)
        self.frame_prefix = frame
        out = list(atoms.values())
        if len(done) > 1:
            self.use("and", "and-list", idx, [self.atom(p) for p in done])
        return out

    def _named_and(self, idx: list[int]) -> bool:
        """Does an "and" join named items (capitalized or "the ...") in this phrase?"""
        for k, i in enumerate(idx):
            if self.low(i) != "and" or i in self.protected or k == 0 or k + 1 >= len(idx):
                continue
            before = idx[k - 1] if self.low(idx[k - 1]) != "," else idx[k - 2] if k >= 2 else None
            after = idx[k + 1] if self.low(idx[k + 1]) not in DETS else idx[k + 2] if k + 2 < len(idx) else None
            if before is not None and after is not None and self.cap(before) and self.cap(after):
                return True
        return False

    def _split(self, idx: list[int], seps: set[str]) -> list[list[int]]:
        """Cut ``idx`` at separator tokens (a protected "and" is not one); empty items dropped."""
        items: list[list[int]] = [[]]
        for i in idx:
            w = self.low(i)
            if w in seps and not (w == "and" and i in self.protected):
                if items[-1]:
                    items.append([])
                continue
            if w in ("either", "both"):
                continue
            if not items[-1] and len(items) > 1 and w in AUX:  # "... and are shrubs"
                continue
            items[-1].append(i)
        return [self.trim(it) for it in items if self.trim(it)]

    def _list(self, items: list[list[int]], op: type[And] | type[Or]) -> Expr:
        """Complete list items that lack their shared part, and join them with ``op``."""
        atoms = [self.atom(p) for p in self._complete(items)]
        return atoms[0] if len(atoms) == 1 else op(atoms)

    def _complete(self, items: list[list[int]]) -> list[list[Piece]]:
        """List items with their shared part restored: a head, a frame, a post-modifier."""
        heads = [self._head_index(it) for it in items]
        preps = [self._starter_after(it, h) if h is not None else None for it, h in zip(items, heads, strict=True)]
        done: list[list[Piece]] = []
        for n, it in enumerate(items):
            if heads[n] is not None and not self._parallel_object(items, preps, n):
                pieces: list[Piece] = list(it)
                # a bare plural head before an item with a post-modifier takes that post-modifier
                if len(it) == 1 and preps[n] is None:
                    later = [m for m in range(n + 1, len(items)) if preps[m] is not None]
                    if later and all(len(items[m]) == 1 for m in range(n + 1, later[0])):
                        m = later[0]
                        pieces += items[m][preps[m] :]
                done.append(pieces)
                continue
            prev = [m for m in range(n - 1, -1, -1) if preps[m] is not None and heads[m] is not None]
            nxt = [m for m in range(n + 1, len(items)) if heads[m] is not None]
            earlier_head = [m for m in range(n - 1, -1, -1) if heads[m] is not None]
            if self.is_starter(it[0]) and earlier_head and not self.is_prep(it[0]):
                # "Films set in Mumbai, shot in London": a participle takes the head alone
                m = earlier_head[0]
                done.append([items[m][heads[m]], *it])  # type: ignore[index]
            elif prev:
                m = prev[0]
                done.append([*items[m][: self._object_start(items[m], self._last_starter(items[m], preps[m]))], *it])
            elif nxt:
                done.append([*it, *self._shared_head(it, items[nxt[0]], heads[nxt[0]])])
            else:
                earlier = [m for m in range(n - 1, -1, -1) if heads[m] is not None]
                if earlier:
                    m = earlier[0]
                    done.append([*it, *self._shared_head(it, items[m], heads[m])])
                else:
                    self.notes.append(f"no shared head found for {self.atom(it).text!r}")
                    done.append(list(it))
        return done

    def _last_starter(self, item: list[int], p: int) -> int:
        """Where the last post-modifier of ``item`` starts (its first is at ``p``): the frame a
        following bare item takes ("Novels by X about India and Pakistan": "Novels about")."""
        k = self._object_start(item, p)
        last = p
        for q in range(k + 1, len(item)):
            if self.is_starter(item[q]) and not self.is_starter(item[q - 1]) and not self.is_ing(item[q]):
                last = q
        return last

    def _parallel_object(self, items: list[list[int]], preps: list[int | None], n: int) -> bool:
        """Is item n a lowercase phrase parallel to the lowercase object of an item before it?

        "Species of birds or flowering plants": "flowering plants" continues "Species of"; so do
        both "sculptors" and "architects" in "films about painters, sculptors or architects".
        """
        it = items[n]
        if n == 0 or any(self.is_starter(i) for i in it[1:]):
            return False
        m = n - 1
        while m > 0 and preps[m] is None and all(self.t[i].text[:1].islower() for i in items[m]):
            m -= 1
        p = preps[m]
        if p is None:
            return False
        prev = items[m]
        obj = prev[self._object_start(prev, p) :]
        between = [i for k in range(m + 1, n + 1) for i in items[k]]
        lower = all(self.t[i].text[:1].islower() for i in [*obj, *between])
        return bool(obj) and lower and not any(self.is_starter(i) for i in obj)

    def _shared_head(self, item: list[int], other: list[int], h: int) -> list[int]:
        """The part of ``other`` that ``item`` (a modifier) shares: "Swiss war films" -> "war films"."""
        last = self.low(item[-1])
        for k in range(h):
            if self.low(other[k]) == last:
                return other[k + 1 :]
        k = 0
        while k < h and self.cap(other[k]):
            k += 1
        k = max(1, min(k, h)) if h > 0 else 0
        return other[k:]

    def _head(self, idx: list[int]) -> list[int]:
        """The head noun of a phrase (the first item's when it is a list), as token indices."""
        first = self._split(idx, {"or", "and", ","})[0] if idx else idx
        h = self._head_index(first)
        if h is not None:
            return [first[h]]
        for k, i in enumerate(first):
            if k > 0 and self.is_starter(i):
                return [first[k - 1]]
        return [first[-1]]

    def _frame_source(self, idx: list[int]) -> list[int]:
        first = self._split(idx, {"or", ","})
        return first[0] if first else idx

    # -- clauses -----------------------------------------------------------------------------------

    def _clause_items(self, cl: _Clause, body: list[int], head: list[int], frame: list[int]) -> list[Expr]:
        seps = {"and", ",", "or", "nor"} if cl.negative else {"and", ","}
        lows = [self.low(i) for i in body]
        if not cl.negative and "or" in lows:
            items = [body]
        else:
            items = self._split(body, seps)
        exprs: list[Expr] = []
        prev_frame: list[Piece] | None = None
        for it in items:
            while it and self.low(it[0]) in ("be", "been", "being"):
                it = it[1:]
            if not it:
                raise Unparsable("an empty clause item")
            pieces = self._clause_item(cl, it, head, frame, prev_frame)
            exprs.append(self.atom(pieces))
            p = self._starter_after(it, -1)
            if p is not None:
                prev_frame = pieces[: len(pieces) - len(it) + self._object_start(it, p)]
        return exprs

    def _clause_item(
        self, cl: _Clause, it: list[int], head: list[int], frame: list[int], prev_frame: list[Piece] | None
    ) -> list[Piece]:
        if self.low(it[0]) in ("those", "ones", "one") and len(it) > 1:
            it = it[1:]  # "excluding those by Jules Verne": the head stands in
        first = it[0]
        if is_demonym([self.t[i].text for i in it]):
            return [*it, *head]  # "that aren't French": "French films"
        if prev_frame is not None and all(self.cap(i) or self.low(i) in DETS for i in it):
            return [*prev_frame, *it]  # "found in Vietnam and Laos": Laos takes "found in"
        if self._head_index(it) is not None and not self.is_starter(first):
            return list(it)  # a noun phrase: "dancers", "Birds of Peru"
        if self.is_prep(first) or self.is_place_adj(first):
            same = [k for k, i in enumerate(frame) if self.low(i) == self.low(first) and k > 0]
            if same:
                return [*frame[: same[0]], *it]  # "Birds found" + "in Colombia"
            return [*head, *it]  # "films" + "about cricket"
        if self.is_participle(first) or self.is_ing(first):
            return [*head, *it]  # "Trees" + "found in Canada"
        if prev_frame is not None and all(self.cap(i) or self.low(i) in DETS for i in it):
            return [*prev_frame, *it]  # "found in X and Y": Y takes "found in"
        if all(self.cap(i) or self.low(i) in DETS for i in it) and self.cap(it[-1]) and self.frame_prefix:
            return [*self.frame_prefix, *it]  # "Afrotropical birds of Kenya but not Uganda": "birds of" + "Uganda"
        if all(self.cap(i) or self.low(i) in DETS for i in it) and self.cap(it[-1]):
            fh = self._head_index(frame)
            p = self._starter_after(frame, fh) if fh is not None else None
            if p is not None:
                return [*frame[: self._object_start(frame, p)], *it]  # "Flora of" + "Peru"
        if not cl.copula:
            if len(it) > 2 and self.low(it[0]) in ("take", "takes", "took") and self.low(it[1]) == "place":
                return [*head, "set", *it[2:]]  # "that take place in Vietnam" is Wikipedia's "set in Vietnam"
            rel = [i for i in cl.marker if self.low(i) in REL]
            return [*head, *rel, *it]  # "Novels" + "that were adapted into films"
        if len(it) == 1 or all(self.t[i].text[:1].islower() for i in it):
            return [*it, *head]  # "extinct" + "Animals"
        return list(it)

    def _fold(self, expr: Expr, extra: list[Sequence[Piece]]) -> Expr:
        """Append positive clauses to every alternative of a union (QUEST never intersects a union)."""
        assert isinstance(expr, Or)
        tail: list[Piece] = [p for seg in extra for p in seg]
        kids: list[Expr] = []
        for c in expr.children:
            assert isinstance(c, Atom)
            kids.append(self._extend(c, tail))
        return Or(kids)

    def _extend(self, a: Atom, tail: list[Piece]) -> Atom:
        extra = self.atom(tail)
        return Atom(f"{a.text} {extra.text}", a.span + extra.span)

    def _combine(self, p: _Parsed) -> Expr:
        pos: list[Expr] = []
        for e in p.pos:
            pos.extend(e.children if isinstance(e, And) else [e])
        if not pos:
            raise Unparsable("no positive constraint")
        left = pos[0] if len(pos) == 1 else And(pos)
        if not p.neg:
            return left
        right = p.neg[0] if len(p.neg) == 1 else Or(p.neg)
        return Diff(left, right)


def read(query: str, toks: list[Tok], tags: dict[int, Tag]) -> tuple[Expr, list[str], list[RuleUse]]:
    """The expression for a tagged query, notes on what the rules did (dropped question words, ...)
    and the rules that made its operators, in the order they applied.

    Raises :class:`Unparsable` when no rule applies (nothing before a negation, an empty clause).
    """
    run = _Run(query, toks, tags)
    expr, notes = run.parse()
    return expr, notes, run.uses
