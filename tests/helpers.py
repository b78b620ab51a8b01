"""What the tests share: hand-written documents, the one way to build a test collection, small tools.

Six documents on unrelated topics, each with a lead and nested sections, are
ingested and built once per test session (``shared_collection``); tests that
mutate a collection copy the built directory instead of rebuilding it. Every
other test collection is made by :func:`build_collection` (documents and/or
files in any reader's format, then a local or sharded build); the fixtures
that hold them are in tests/conftest.py.
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import json
import shutil
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from hiera.builds import build_collection as build_any
from hiera.corpus.ingest import ingest
from hiera.corpus.readers.base import Record
from hiera.corpus.store import CorpusStore
from hiera.corpus.tree import Document, PassageRules, Section
from hiera.index.build import BuildOptions


def _long(*sentences: str) -> str:
    return " ".join(sentences)


def make_docs() -> list[Document]:
    """The six base documents (fresh objects on every call)."""
    return [
        Document(
            id="volcanoes",
            title="Volcanoes",
            lead=[
                "A volcano is a rupture in the crust of a planet where molten magma, volcanic ash and gases "
                "escape from a chamber below the surface.",
                "Volcanoes are found where tectonic plates diverge or converge, and over hotspots in the mantle.",
            ],
            sections=[
                Section(
                    "Formation",
                    paragraphs=[
                        "Magma rises because it is less dense than the surrounding rock. It collects in a magma "
                        "chamber and erupts through a vent when the pressure of dissolved gases becomes too great."
                    ],
                ),
                Section(
                    "Types of volcanoes",
                    paragraphs=["Geologists classify volcanoes by the shape of the cone and the kind of lava."],
                    children=[
                        Section(
                            "Shield volcanoes",
                            level=2,
                            paragraphs=[
                                "Shield volcanoes have broad gentle slopes built by fluid basaltic lava flows, "
                                "like Mauna Loa in Hawaii."
                            ],
                        ),
                        Section(
                            "Stratovolcanoes",
                            level=2,
                            paragraphs=[
                                "Stratovolcanoes are steep conical mountains of alternating layers of ash and "
                                "viscous lava, such as Mount Fuji and Vesuvius."
                            ],
                        ),
                    ],
                ),
                Section(
                    "Eruptions",
                    paragraphs=[
                        _long(
                            "An explosive eruption throws pumice, tephra and ash high into the stratosphere.",
                            "Pyroclastic flows of hot gas and rock rush down the flanks of the volcano at great speed.",
                            "Effusive eruptions instead pour out rivers of lava that creep across the landscape.",
                            "Volcanologists monitor seismic tremors, ground swelling and sulfur dioxide emissions "
                            "to forecast an eruption.",
                            "The eruption of Mount Tambora in 1815 caused the year without a summer in Europe.",
                            "Lahars, which are mudflows of volcanic debris and water, can bury towns far from the crater.",
                            "Ash clouds from an erupting volcano ground aircraft because the glassy particles melt "
                            "inside jet engines.",
                            "Some eruptions last only hours while others continue for decades.",
                        )
                    ],
                ),
            ],
            categories=["Geology"],
        ),
        Document(
            id="chess",
            title="Chess",
            lead=[
                "Chess is a board game for two players played on a checkered chessboard of sixty-four squares "
                "arranged in an eight by eight grid."
            ],
            sections=[
                Section(
                    "Rules",
                    paragraphs=["Each player begins with sixteen pieces, and White always moves first."],
                    children=[
                        Section(
                            "Movement of the pieces",
                            level=2,
                            paragraphs=[
                                "The knight moves in an L shape and is the only piece that can jump over others. "
                                "The bishop moves diagonally, the rook moves along ranks and files, and the queen "
                                "combines both."
                            ],
                        ),
                        Section(
                            "Checkmate",
                            level=2,
                            paragraphs=[
                                "The goal is to checkmate the opponent's king, attacking it so that it has no "
                                "legal move to escape capture."
                            ],
                        ),
                    ],
                ),
                Section(
                    "History",
                    paragraphs=[
                        "Chess developed from the Indian game chaturanga around the sixth century and reached "
                        "Europe through Persia. World champions such as Kasparov and Carlsen are grandmasters "
                        "famous for their opening preparation."
                    ],
                ),
                Section(
                    "Computers",
                    paragraphs=[
                        "The IBM computer Deep Blue defeated Garry Kasparov in 1997, and modern chess engines "
                        "evaluate millions of positions per second."
                    ],
                ),
            ],
            categories=["Games"],
        ),
        Document(
            id="jazz",
            title="Jazz",
            lead=[
                "Jazz is a music genre that originated in the African-American communities of New Orleans in "
                "the late nineteenth century, rooted in blues and ragtime."
            ],
            sections=[
                Section(
                    "Characteristics",
                    paragraphs=[
                        "Jazz is characterized by swing rhythm, syncopation, blue notes and improvisation, where "
                        "soloists invent melodies over the chord changes."
                    ],
                    children=[
                        Section(
                            "Instruments",
                            level=2,
                            paragraphs=[
                                "A jazz band typically features saxophone, trumpet, trombone, piano, double bass "
                                "and drums."
                            ],
                        )
                    ],
                ),
                Section(
                    "Styles",
                    paragraphs=[
                        "Bebop musicians such as Charlie Parker and Dizzy Gillespie played fast, harmonically "
                        "complex tunes. Cool jazz, modal jazz and fusion followed, and Miles Davis recorded "
                        "Kind of Blue in 1959."
                    ],
                ),
                Section(
                    "Notable musicians",
                    paragraphs=[
                        "Louis Armstrong, Duke Ellington and John Coltrane are among the most influential jazz "
                        "musicians, and Ella Fitzgerald was famous for scat singing."
                    ],
                ),
            ],
            categories=["Music"],
        ),
        Document(
            id="photosynthesis",
            title="Photosynthesis",
            lead=[
                "Photosynthesis is the process by which plants, algae and cyanobacteria convert light energy "
                "from the sun into chemical energy stored in glucose."
            ],
            sections=[
                Section(
                    "Light-dependent reactions",
                    paragraphs=[
                        "In the thylakoid membranes of the chloroplast, chlorophyll absorbs sunlight and splits "
                        "water molecules, releasing oxygen and producing ATP and NADPH."
                    ],
                ),
                Section(
                    "Calvin cycle",
                    paragraphs=[
                        "In the stroma, the enzyme RuBisCO fixes carbon dioxide from the air into sugar using "
                        "the ATP and NADPH made by the light reactions."
                    ],
                    children=[
                        Section(
                            "C4 and CAM plants",
                            level=2,
                            paragraphs=[
                                "Maize, sugarcane and cacti use C4 or CAM carbon fixation to save water in hot, "
                                "dry climates."
                            ],
                        )
                    ],
                ),
                Section(
                    "Evolution",
                    paragraphs=[
                        "Oxygenic photosynthesis evolved in ancient cyanobacteria, whose oxygen caused the Great "
                        "Oxidation Event about 2.4 billion years ago."
                    ],
                ),
            ],
            categories=["Biology"],
        ),
        Document(
            id="roman-empire",
            title="Roman Empire",
            lead=[
                "The Roman Empire was the period of ancient Rome ruled by emperors, beginning when Augustus "
                "became the first emperor in 27 BC."
            ],
            sections=[
                Section(
                    "Army",
                    paragraphs=[
                        "The Roman legions were disciplined units of heavy infantry led by centurions, and they "
                        "built roads, forts and Hadrian's Wall on the frontier of Britain."
                    ],
                ),
                Section(
                    "Government",
                    paragraphs=["The emperor held supreme power while the senate kept a ceremonial role."],
                    children=[
                        Section(
                            "Provinces",
                            level=2,
                            paragraphs=[
                                "Conquered lands from Hispania to Syria were governed as provinces by proconsuls "
                                "who collected taxes for Rome."
                            ],
                        )
                    ],
                ),
                Section(
                    "Fall of the Western Empire",
                    paragraphs=[
                        "Barbarian invasions by Goths and Vandals, civil wars and economic crisis led to the "
                        "fall of the Western Roman Empire in 476 AD."
                    ],
                ),
                Section(
                    "Culture",
                    paragraphs=[
                        "Latin literature flourished with Virgil and Ovid, and gladiators fought in the Colosseum "
                        "before crowds of spectators."
                    ],
                ),
            ],
            categories=["History"],
        ),
        Document(
            id="python-language",
            title="Python (programming language)",
            lead=[
                "Python is a high-level, general-purpose programming language created by Guido van Rossum "
                "and first released in 1991."
            ],
            sections=[
                Section(
                    "Syntax",
                    paragraphs=[
                        "Python uses significant indentation instead of curly braces to delimit code blocks, "
                        "and its syntax emphasizes readability."
                    ],
                    children=[
                        Section(
                            "Typing",
                            level=2,
                            paragraphs=[
                                "Python is dynamically typed and garbage collected, and optional type hints can "
                                "be checked by tools such as mypy."
                            ],
                        )
                    ],
                ),
                Section(
                    "Implementations",
                    paragraphs=[
                        "The reference interpreter CPython compiles source code to bytecode, while PyPy uses a "
                        "just-in-time compiler. Packages are installed from the Python Package Index with pip."
                    ],
                ),
                Section(
                    "Standard library",
                    paragraphs=[
                        "Python's large standard library, often described as batteries included, offers modules "
                        "for regular expressions, file handling and networking."
                    ],
                ),
            ],
            categories=["Programming languages"],
        ),
    ]


def make_extra_docs() -> list[Document]:
    """Two documents that ``add`` tests append to a built collection."""
    return [
        Document(
            id="honeybees",
            title="Honeybee",
            lead=[
                "The honeybee is a social insect that lives in a colony ruled by a single queen and collects "
                "nectar and pollen from flowers to make honey and beeswax."
            ],
            sections=[
                Section(
                    "Hive",
                    paragraphs=[
                        "Worker bees build hexagonal wax combs in the hive and communicate the direction of "
                        "flowers with the waggle dance."
                    ],
                ),
                Section(
                    "Beekeeping",
                    paragraphs=["Beekeepers use smokers to calm the bees before harvesting honey from the frames."],
                ),
            ],
        ),
        Document(
            id="lighthouses",
            title="Lighthouse",
            lead=[
                "A lighthouse is a tower with a bright lamp and lens that guides ships at sea and warns sailors "
                "of dangerous rocks near the coast."
            ],
            sections=[
                Section(
                    "Fresnel lens",
                    paragraphs=[
                        "The Fresnel lens concentrates the beam of the lighthouse lamp so that mariners can see "
                        "it from many nautical miles away."
                    ],
                ),
            ],
        ),
    ]


def _s(title: str, text: str = "", *children: Section) -> Section:
    return Section(title=title, paragraphs=[text] if text else [], children=list(children))


def _levels(sections: list[Section], level: int = 1) -> list[Section]:
    """Heading levels as a reader would set them (1 under the title, 2 below …)."""
    for s in sections:
        s.level = level
        _levels(s.children, level + 1)
    return sections


_PAGE_DOCS = [
    Document(
        id="solar_system",
        title="Solar System",
        lead=["The Solar System is the Sun and the objects that orbit it, held together by gravity."],
        sections=[
            _s(
                "Planets",
                "Eight planets orbit the Sun on nearly circular paths in one plane.",
                _s("Inner planets", "Mercury, Venus, Earth and Mars are rocky terrestrial planets close to the Sun."),
                _s(
                    "Outer planets",
                    "",
                    _s("Gas giants", "Jupiter and Saturn are the gas giants, made mostly of hydrogen and helium."),
                    _s("Ice giants", "Uranus and Neptune are ice giants rich in water, ammonia and methane ices."),
                ),
            ),
            _s("Formation", "The Solar System formed 4.6 billion years ago from a collapsing molecular cloud."),
        ],
        categories=["Astronomy"],
        links=[f"Link {i}" for i in range(250)],
    ),
    Document(
        id="honey_bee",
        title="Honey bee",
        lead=["The honey bee is a flying insect that lives in large colonies and makes honey from nectar."],
        sections=[
            _s(
                "Colony",
                "A colony has one queen, thousands of workers and a few hundred drones.",
                _s("Queen", "The queen is the only fertile female and lays up to two thousand eggs a day."),
                _s(
                    "Workers",
                    "Worker bees are sterile females that clean the hive, feed the larvae, build wax comb and "
                    "forage for nectar and pollen outside the hive.",
                ),
                _s("Drones", "Drones are male bees whose only task is to mate with a queen from another colony."),
            ),
            _s("Pollination", "Bees pollinate crops such as apples, almonds and clover while collecting pollen."),
            _s("Honey production", "Bees turn nectar into honey by evaporating water and adding enzymes in the comb."),
        ],
        categories=["Insects"],
    ),
    Document(
        id="volcano",
        title="Volcano",
        lead=["A volcano is a rupture in the crust of a planet where lava, ash and gases escape."],
        sections=[
            _s(
                "Types",
                "Volcanoes are classified by their shape and the kind of eruption they produce.",
                _s("Shield volcanoes", "Shield volcanoes such as Mauna Loa have gentle slopes built from fluid basalt lava."),
                _s("Stratovolcanoes", "Stratovolcanoes are steep cones of alternating layers of lava and ash."),
            ),
            _s("Eruptions", "Explosive eruptions throw pyroclastic flows and ash columns high into the atmosphere."),
            _s(
                "Famous volcanoes",
                "",
                _s("Mount Vesuvius", "Mount Vesuvius buried the Roman city of Pompeii under ash in the year 79."),
            ),
        ],
    ),
    Document(
        id="chess",
        title="Chess",
        lead=["Chess is a board game for two players played on a checkered board of sixty-four squares."],
        sections=[
            _s(
                "Rules",
                "Each player starts with sixteen pieces: a king, a queen, two rooks, two bishops, two knights and eight pawns.",
                _s(
                    "Movement",
                    "The knight moves in an L shape and is the only piece that can jump over others.",
                    _s("Castling", "Castling moves the king two squares towards a rook, which jumps over the king."),
                ),
                _s("Check and checkmate", "A king that is attacked is in check; checkmate ends the game."),
            ),
            _s("History", "Chess developed from the Indian game chaturanga before the sixth century."),
            # Two sibling sections with the same title share a section path.
            _s("Notes", "The first note is about the fifty-move rule for draws."),
            _s("Notes", "The second note is about threefold repetition of a position."),
        ],
    ),
    Document(
        id="AC/DC",
        title="AC/DC",
        lead=["AC/DC is an Australian rock band formed in Sydney in 1973 by the brothers Malcolm and Angus Young."],
        sections=[
            _s("Markup", "Fans type <script>alert('x')</script> and <b>bold</b> tags when they write about rock music."),
        ],
    ),
]
for _doc in _PAGE_DOCS:
    _levels(_doc.sections)


def make_page_docs() -> list[Document]:
    """The served collection's five documents (fresh objects on every call).

    Nested sections several levels deep, two sibling sections with one title,
    an id with a slash, markup in the text and 250 links: what the API and the
    page must render safely.
    """
    return copy.deepcopy(_PAGE_DOCS)


#: texts to encode: short and long (one longer than a passage), for the encoder's tests
ENCODE_TEXTS = [
    "Volcanoes erupt when the pressure of dissolved gases in the magma chamber becomes too great.",
    "Chess is a board game for two players on a checkered board of sixty-four squares.",
    "Jazz originated in New Orleans in the late nineteenth century, rooted in blues and ragtime.",
    "Photosynthesis converts light energy into chemical energy stored in glucose. " * 6,
    "Short.",
]

#: a query about each document's topic, by document id
TOPIC_QUERIES: dict[str, str] = {
    "volcanoes": "magma and lava erupting from a volcano crater",
    "chess": "how does the knight move on the chessboard",
    "jazz": "improvisation and swing rhythm in jazz music",
    "photosynthesis": "how plants convert sunlight into chemical energy with chlorophyll",
    "roman-empire": "emperor Augustus and the Roman legions",
    "python-language": "Python programming language interpreter and indentation",
    "honeybees": "honeybee colony with a queen making honey",
    "lighthouses": "lighthouse lamp guiding ships at sea",
}

QUIET: Any = lambda m: None  # noqa: E731 - a build log that prints nothing

_STATE: dict[str, Path] = {}


def session_cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One embedding cache for the whole session (never the user's ~/.cache)."""
    if "cache" not in _STATE:
        _STATE["cache"] = tmp_path_factory.mktemp("hiera-cache")
    return _STATE["cache"]


def build_collection(
    root: Path,
    docs: list[Record] = (),  # type: ignore[assignment]
    options: BuildOptions | None = None,
    *,
    files: list[Path] = (),  # type: ignore[assignment]
    fmt: str = "hiera-jsonl",
    rules: PassageRules | None = None,
) -> Path:
    """The one way a test makes a built collection: ingest ``files`` (read as ``fmt``) and/or ``docs``, then build.

    Records (documents, redirects) go in after the files; the build goes through
    :func:`hiera.builds.build_collection`, so ``options`` may ask for shards.
    Tests of ingest or build themselves call those directly instead.
    """
    if files:
        ingest(files, fmt, root, rules=rules, progress=False)
    if docs or not files:
        store = CorpusStore(root, create=True)
        store.ingest(list(docs), rules=rules)
        store.close()
    build_any(root, options or BuildOptions(progress=False), log=QUIET)
    return root


SHARED_BACKEND = "torch"  # the shared collection's encoder backend: rebuild its copies with it to compare


def shared_collection(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The six-document collection, ingested and built once per session. Do not mutate it."""
    if "shared" not in _STATE:
        root = tmp_path_factory.mktemp("shared") / "col"
        # torch, the reference backend: tests recompute what retrievers do with sentence-transformers itself and
        # compare to float16 rounding, which int8 document vectors (the default, auto) are not; the default
        # backend has its own tests (test_backends, test_demo) and every other built collection uses it
        opts = BuildOptions(progress=False, cache_dir=session_cache_dir(tmp_path_factory), backend=SHARED_BACKEND)
        _STATE["shared"] = build_collection(root, make_docs(), opts)
    return _STATE["shared"]


def copy_collection(src: Path, dst: Path) -> Path:
    """A private copy of a built collection (the ``index`` symlink is relative)."""
    shutil.copytree(src, dst, symlinks=True)
    return dst


def export_digest(root: Path) -> str:
    """sha256 over every stored document's tree and passages, in store order."""
    store = CorpusStore(root)
    h = hashlib.sha256()
    for d in store.iter_docs():
        doc = store.get_document(d.id)
        assert doc is not None
        h.update(json.dumps(doc.to_dict(), sort_keys=True).encode())
        h.update(d.summary.encode())
    for rowid, p in store.iter_passages():
        h.update(f"{rowid}|{p.id}|{p.section_path}|{p.text}".encode())
    store.close()
    return h.hexdigest()


def nonblank_lines(path: Path) -> int:
    """How many records a line-per-record file holds: what a loader must return, none lost and none invented."""
    with path.open(encoding="utf-8") as fh:
        return sum(1 for line in fh if line.strip())


def write_jsonl(path: Path, docs: list[Document]) -> Path:
    path.write_text("".join(json.dumps(d.to_dict()) + "\n" for d in docs), encoding="utf-8")
    return path


def tiny_questions() -> list:
    """Questions (hiera.eval.questions.Question) whose answers sit in one known passage of the shared collection."""
    from hiera.eval.questions import Question

    return [
        Question("q1", "Which eruption caused the year without a summer?", ["Mount Tambora"]),
        Question("q2", "Which shield volcano in Hawaii has gentle slopes?", ["Mauna Loa"]),
        Question("q3", "Why does magma rise through rock?", ["less dense"]),
        Question("q4", "Which computer defeated Kasparov?", ["Deep Blue"]),
        Question("q5", "Which piece moves in an L shape?", ["knight"]),
        Question("q6", "Who created the Python programming language?", ["Guido van Rossum"]),
        Question("q7", "Which enzyme fixes carbon dioxide in the Calvin cycle?", ["RuBisCO"]),
        Question("q8", "Who led the Roman legions?", ["centurions"]),
    ]


def tiny_classifier() -> Path:
    """An untrained one-logit cross-encoder from the base model, saved once per session (a valid ``classifier``)."""
    if "classifier" not in _STATE:
        import atexit
        import tempfile

        from sentence_transformers import CrossEncoder

        from hiera.encode import resolve_model_path
        from hiera.models import quiet_transformers

        root = Path(tempfile.mkdtemp(prefix="hiera-classifier-"))
        atexit.register(shutil.rmtree, root, True)
        with quiet_transformers():
            model = CrossEncoder(str(resolve_model_path("all-MiniLM-L6-v2")), num_labels=1, max_length=64, device="cpu")
        model.save(str(root / "clf"))
        _STATE["classifier"] = root / "clf"
    return _STATE["classifier"]


def tiny_fetchhr() -> Path:
    """Untrained FetchHR heads over all-MiniLM-L6-v2 (small FFNs), saved once per session (a valid ``model``)."""
    if "fetchhr" not in _STATE:
        import atexit
        import tempfile
        from dataclasses import replace

        from hiera.encode import Encoder
        from hiera.fetchhr.model import FetchHRModel
        from hiera.fetchhr.rnet import RNetSet

        root = Path(tempfile.mkdtemp(prefix="hiera-fetchhr-"))
        atexit.register(shutil.rmtree, root, True)
        free = FetchHRModel.mean_pooled(Encoder("all-MiniLM-L6-v2", use_cache=False))
        cfg = replace(free.config, heads=12, ffn=64, depth=2, dropout=0.1)
        FetchHRModel(cfg, free.encoder, RNetSet(cfg.layers, cfg.dim, 12, 64)).save(root / "fetchhr")
        _STATE["fetchhr"] = root / "fetchhr"
    return _STATE["fetchhr"]


@dataclass
class Reference:
    """Everything DHR computes, recomputed from the store texts with the model itself."""

    doc_ids: list[str]
    passage_ids: list[str]
    passage_doc: np.ndarray  # document position of each passage
    D: np.ndarray  # document summary vectors
    P: np.ndarray  # passage (titled text) vectors
    model: object
    _queries: dict[str, np.ndarray] = field(default_factory=dict)

    def query(self, q: str) -> np.ndarray:
        if q not in self._queries:
            vec = self.model.encode([q], normalize_embeddings=True, convert_to_numpy=True)[0]
            self._queries[q] = vec.astype(np.float32)
        return self._queries[q]

    def dhr(self, qv: np.ndarray, k1: int, lam: float) -> tuple[list[str], dict[str, float]]:
        ds = self.D @ qv
        order = sorted(range(len(ds)), key=lambda i: (-ds[i], i))
        chosen = order[:k1]
        ps = self.P @ qv
        scores = {
            pid: float(ps[i] + lam * ds[self.passage_doc[i]])
            for i, pid in enumerate(self.passage_ids)
            if self.passage_doc[i] in chosen
        }
        return [self.doc_ids[i] for i in chosen], scores


def reference(col: Any) -> Reference:
    """The :class:`Reference` of a built collection (a hiera.collection.Collection), with the model loaded once."""
    from sentence_transformers import SentenceTransformer

    from hiera.encode import resolve_model_path

    model = SentenceTransformer(str(resolve_model_path("all-MiniLM-L6-v2")), device="cpu")
    docs = list(col.store.iter_docs())
    passages = [p for _, p in col.store.iter_passages()]
    pos = {d.id: i for i, d in enumerate(docs)}
    sep = col.store.rules.title_sep

    def enc(texts: list[str]) -> np.ndarray:
        return model.encode(texts, normalize_embeddings=True, convert_to_numpy=True).astype(np.float32)

    return Reference(
        doc_ids=[d.id for d in docs],
        passage_ids=[p.id for p in passages],
        passage_doc=np.array([pos[p.doc_id] for p in passages]),
        D=enc([d.summary for d in docs]),
        P=enc([p.titled_text(sep) for p in passages]),
        model=model,
    )


# path parameters of the registry: a valid value for each (walking the registry needs one that loads)
PATH_VALUES: dict[str, Any] = {
    "model": tiny_fetchhr,
    "classifier": tiny_classifier,
    "reranker": tiny_classifier,  # a one-logit cross-encoder is a valid reranker too
    "decomposer_url": lambda: "http://127.0.0.1:9/v1",  # unused unless decomposer=endpoint (default: rules)
    "parser_url": lambda: "http://127.0.0.1:9/v1",  # unused unless parser=endpoint (default: rules)
}


# string parameters whose unset default has no "other" spelling: a valid value for each
STR_VALUES: dict[str, str] = {"layers": "1,6", "k_per_layer": "2"}


def other_value(param, default):
    """A valid value of a registry parameter that differs from ``default`` (for walking the registry)."""
    if param.type in ("path", "url"):
        return str(PATH_VALUES[param.name]())
    if default is None and param.type in ("int", "float"):  # "unset": a value inside the bounds
        lo = param.min if param.min is not None else 0
        hi = param.max if param.max is not None else lo + 2
        mid = (lo + hi) / 2
        return int(mid) if param.type == "int" else round(mid, 4)
    if param.type == "str" and default is None and param.name in STR_VALUES:  # "unset" strings with a syntax
        return STR_VALUES[param.name]
    if param.choices:
        return next(c for c in param.choices if c not in (default, param.default, "auto"))
    if param.type == "bool":
        return not default
    if param.type == "int":
        return int(default) + 1 if param.max is None or default + 1 <= param.max else int(default) - 1
    if param.type == "float":
        step = 0.05 if (param.max or 0) <= 1 else 0.5
        return round(default + step, 4) if param.max is None or default + step <= param.max else round(default - step, 4)
    return f"{default}-other"


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """``hiera ARGV`` run in-process: (exit code, stdout, stderr)."""
    from hiera.cli import main

    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def running_server(app) -> Iterator[str]:  # noqa: ANN001 - a FastAPI app
    """uvicorn serving ``app`` on 127.0.0.1 and a port the OS picks, in a background thread; yields its URL."""
    import threading
    import time

    import uvicorn

    config = uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", access_log=False)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name="uvicorn-test", daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            pytest.fail("the test server did not start")
        time.sleep(0.05)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}/"
    finally:
        server.should_exit = True
        thread.join(timeout=10)


# the served collection (collection_dir): a key for the guarded app, a cheap search that finds something
API_KEY = "s3cret-key-0123456789"
BEE_SEARCH = "/search?q=worker+bees&retriever=bm25&k=3"


def one_line_detail(r: Any) -> str:
    """An HTTP error response's ``detail``: one line of text, never a traceback or an object."""
    detail = r.json()["detail"]
    assert isinstance(detail, str) and detail and "\n" not in detail, detail
    return detail


# headless Chromium for the browser tests (Debian's package; the tests skip without it)
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@dataclass
class FakeChat:
    """A fake OpenAI-compatible server on 127.0.0.1: ``URL/<mode>/v1/chat/completions`` answers by mode.

    Modes every endpoint test needs are built in — ``error`` (HTTP 500), ``slow`` (1.5 s, then the ``good``
    content), ``notchat`` (JSON that is no chat completion) — and ``content(mode)`` gives the assistant's text
    for every other mode. ``requests`` records what each call sent, so a test can check the request's shape.
    """

    url: str
    requests: list[dict] = field(default_factory=list)


@contextlib.contextmanager
def fake_chat_server(content: Any) -> Iterator[FakeChat]:  # noqa: ANN401 - Callable[[str], str]
    """Run a :class:`FakeChat` whose replies come from ``content(mode)`` (a callable on the mode's name)."""
    import threading
    import time
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    chat = FakeChat(url="")

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:  # quiet
            pass

        def do_POST(self) -> None:  # noqa: N802 - http.server's naming
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            chat.requests.append({"path": self.path, "body": body})
            mode = self.path.split("/")[1]
            if mode == "slow":
                time.sleep(1.5)
            if mode == "error":
                self.send_response(500)
                self.end_headers()
                self.wfile.write(b"internal error")
                return
            reply: dict = {"choices": [{"message": {"role": "assistant", "content": content(mode)}}]}
            if mode == "notchat":
                reply = {"result": "hello"}
            data = json.dumps(reply).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            try:
                self.wfile.write(data)
            except BrokenPipeError:  # the client timed out first (the "slow" mode)
                pass

    srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    chat.url = f"http://127.0.0.1:{srv.server_address[1]}"
    try:
        yield chat
    finally:
        srv.shutdown()
        srv.server_close()


def chat_fixture(content: Any) -> Any:  # noqa: ANN401 - a pytest fixture
    """A module-scoped ``chat`` fixture: :func:`fake_chat_server` answering with ``content(mode)``."""

    @pytest.fixture(scope="module")
    def chat() -> Iterator[FakeChat]:
        with fake_chat_server(content) as fake:
            yield fake

    return chat
