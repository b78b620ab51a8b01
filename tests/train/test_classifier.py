"""``hiera train-classifier``: labels derived from set expressions, and a short real run that loads and scores."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from hiera.builds import open_collection
from hiera.cli import main
from hiera.collection import Collection
from hiera.errors import BadInputError
from hiera.retrieve.sets import SetsRetriever
from hiera.sets.classifier import THRESHOLDS_FILE, SetClassifier
from hiera.sets.expr import And, Atom, Diff, Or
from hiera.train.args import ClassifierArgs
from hiera.train.classifier import Labels, atom_labels, classifier_units

G = {"g1", "g2"}


def labels(expr, assign=None) -> dict[str, Labels]:
    return {a.text: lab for a, lab in atom_labels(expr, G, assign)}


def test_labels_follow_the_set_algebra() -> None:
    one = labels(Atom("A"))["A"]
    assert one.positives == G and one.universes == [G] and not one.negatives
    inter = labels(And((Atom("A"), Atom("B"))))
    assert all(lab.positives == G and not lab.universes for lab in inter.values())  # A ∩ B = G says A ⊇ G only
    diff = labels(Diff(And((Atom("A"), Atom("B"))), Atom("C")))
    assert diff["A"].positives == G and diff["C"].negatives == G and not diff["C"].positives
    union = labels(Or((Atom("A"), Atom("B"))))
    assert all(not lab.positives and lab.universes == [G] for lab in union.values())
    assigned = labels(Or((Atom("A"), Atom("B"))), assign=lambda node, docs: {1: {"g2"}})
    assert assigned["B"].positives == {"g2"} and not assigned["A"].positives
    lab = Labels(positives={"x", "y"}, negatives={"y"}, universes=[{"x", "y", "z"}])
    lab.clean()
    assert lab.positives == {"x"} and not lab.negatives and lab.outside("w") and not lab.outside("z")


def test_classifier_args_are_checked() -> None:
    with pytest.raises(BadInputError):
        ClassifierArgs(units="queries").check()
    with pytest.raises(BadInputError):
        ClassifierArgs(negatives=1).check()
    assert ClassifierArgs().check().max_length == 64


def test_units_from_real_queries(quest: dict, quest_col: Collection) -> None:
    from hiera.sets.queries import load_set_queries

    units, stats = classifier_units(quest_col, load_set_queries(quest["queries"]))
    assert stats["queries"] == 5 and stats["gold_titles_missing"] == 0
    # the parser's texts: "mathematicians born in the 19th century", not the annotation's "born in the 19th century"
    assert "mathematicians born in the 19th century" in units
    assert units["chemists"].negatives and not units["chemists"].positives
    assert units["American physicists"].positives
    # a union's gold documents go to the alternative BM25 prefers (Turner to the English painters)
    assert quest_col.store.resolve_title("J. M. W. Turner") in units["English painters"].positives
    assert units["German architects"].kind == "query"  # a one-atom query is its own unit


def test_train_classifier_cli_then_tune_then_search(quest: dict, tmp_path: Path, capsys) -> None:
    out = tmp_path / "clf"
    rc = main(["train-classifier", str(quest["root"]), "--questions", str(quest["queries"]), "--format", "quest",
               "--out", str(out), "--max-steps", "2", "--batch-size", "4", "--negatives", "4", "--max-length", "48",
               "--quiet"])
    report = json.loads(capsys.readouterr().out)
    assert rc == 0 and report["train"]["steps"] == 2 and report["peak_rss_mb"] > 0 and report["seconds_total"] > 0
    meta = json.loads((out / "hiera-reranker.json").read_text())
    assert meta["kind"] == "set-classifier" and 0 <= meta["threshold"] <= 1
    assert not (tmp_path / "clf.partial").exists()
    clf = SetClassifier(out)
    assert clf.thresholds.source == "calibrated"
    p = clf.score("German architects", ["a", "b"], ["Walter Gropius\nGerman architect.", "Chess\nA board game."])
    assert p.shape == (2,) and np.all((p >= 0) & (p <= 1))
    assert clf.score("German architects", ["a"], ["(cached: not read)"])[0] == pytest.approx(p[0])

    # the same --out with another recipe: the finished run's checkpoint is not resumed (it would end the run at once)
    assert (tmp_path / "clf.work" / "checkpoints" / "checkpoint-2").is_dir()
    rc = main(["train-classifier", str(quest["root"]), "--questions", str(quest["queries"]), "--format", "quest",
               "--out", str(out), "--max-steps", "2", "--batch-size", "4", "--negatives", "4", "--max-length", "48",
               "--lr", "1e-4", "--quiet"])
    again = json.loads(capsys.readouterr().out)
    assert rc == 0 and again["train"]["resumed_from"] is None and again["train"]["steps"] == 2

    rc = main(["sets", "tune", str(quest["root"]), "--questions", str(quest["queries"]), "--format", "quest",
               "--classifier", str(out), "--set", "candidates=5", "--quiet"])
    tuned = json.loads(capsys.readouterr().out)
    assert rc == 0 and tuned["saved"] and (out / THRESHOLDS_FILE).exists() and 0 <= tuned["f1"] <= 1
    assert SetClassifier(out).thresholds.source == "tuned"

    res = SetsRetriever(open_collection(quest["root"]), classifier=str(out), candidates=5).search("German architects", k=5)
    cl = next(s for s in res.trace if s.name == "classify").detail
    assert cl["classifier"] == "clf" and cl["thresholds_from"] == "tuned" and res.answer_set is not None
    assert main(["train-classifier", str(quest["root"]), "--questions", str(quest["queries"]), "--format", "squad",
                 "--out", str(tmp_path / "x")]) == 2
