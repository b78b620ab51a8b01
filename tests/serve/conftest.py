"""A tiny built collection and one served app, shared by the API and browser tests.

Five hand-written documents with nested sections (about 30 passages) are
ingested and indexed once per session: encoding them with MiniLM takes a few
seconds, loading the app's models a few more, so every test reuses both.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi import FastAPI

from hiera.corpus.store import CorpusStore
from hiera.corpus.tree import Document, Section


def _s(title: str, text: str = "", *children: Section) -> Section:
    return Section(title=title, paragraphs=[text] if text else [], children=list(children))


def _levels(sections: list[Section], level: int = 1) -> list[Section]:
    """Heading levels as a reader would set them (1 under the title, 2 below …)."""
    for s in sections:
        s.level = level
        _levels(s.children, level + 1)
    return sections


DOCS = [
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
for _doc in DOCS:
    _levels(_doc.sections)


@pytest.fixture(scope="session")
def collection_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Ingest and build :data:`DOCS` with a private embedding cache."""
    from hiera.index.build import BuildOptions, build

    cache = tmp_path_factory.mktemp("embcache")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HIERA_CACHE_DIR", str(cache))
        root = tmp_path_factory.mktemp("collections") / "tiny"
        CorpusStore(root, create=True).ingest(DOCS)
        build(root, BuildOptions(progress=False, cache_dir=cache), log=lambda m: None)
        yield root


@pytest.fixture(scope="session")
def app(collection_dir: Path) -> FastAPI:
    """One app (models loaded once); each TestClient or server runs its lifespan."""
    from hiera.serve import create_app

    return create_app(collection_dir, warmup=True)
