"""Resuming only the run a checkpoint belongs to (hiera.train.common)."""

from __future__ import annotations

from hiera.train.args import ClassifierArgs
from hiera.train.common import pairs_digest, resume_point, rows_digest, run_key


def _checkpoint(folder, step):
    ck = folder / f"checkpoint-{step}"
    ck.mkdir(parents=True)
    (ck / "trainer_state.json").write_text("{}")
    return ck


def test_same_run_resumes_from_its_newest_checkpoint(tmp_path):
    folder = tmp_path / "checkpoints"
    assert resume_point(folder, "k1", log=lambda m: None) is None  # nothing yet; the key is recorded
    _checkpoint(folder, 5)
    newest = _checkpoint(folder, 12)
    assert resume_point(folder, "k1", log=lambda m: None) == str(newest)


def test_other_run_discards_the_checkpoints(tmp_path):
    folder = tmp_path / "checkpoints"
    resume_point(folder, "k1", log=lambda m: None)
    _checkpoint(folder, 7)
    said = []
    assert resume_point(folder, "k2", log=said.append) is None
    assert not list(folder.glob("checkpoint-*")) and said and "another run" in said[0]
    # the new key is the folder's now: its own checkpoints resume
    ck = _checkpoint(folder, 3)
    assert resume_point(folder, "k2", log=lambda m: None) == str(ck)


def test_checkpoints_without_a_key_are_not_resumed(tmp_path):
    """Checkpoints left by a version that wrote no key cannot be told apart from another run's."""
    folder = tmp_path / "checkpoints"
    _checkpoint(folder, 4)
    assert resume_point(folder, "k", log=lambda m: None) is None
    assert not list(folder.glob("checkpoint-*"))


def test_run_key_follows_the_recipe_and_the_data_not_the_budget():
    a = ClassifierArgs().to_dict()
    base = run_key(a, "data")
    assert run_key(a | {"max_minutes": 5.0, "progress": True, "max_steps": 99, "epochs": 3.0}, "data") == base
    assert run_key(a | {"learning_rate": 1e-5}, "data") != base
    # a field added later and left unset keeps older runs' keys (their checkpoints resume); once set, it counts
    assert run_key(a | {"init": None}, "data") == base
    assert run_key(a | {"init": "readers/first"}, "data") != base
    assert run_key(a, "other data") != base
    pairs = [("q", "doc a"), ("q", "doc b")]
    assert pairs_digest(pairs, [1.0, 0.0]) != pairs_digest(pairs, [0.0, 1.0])
    assert rows_digest({"anchor": ["x"], "positive": ["y"]}) != rows_digest({"anchor": ["y"], "positive": ["x"]})


def test_holdout_is_seeded_ordered_and_keeps_a_lone_item():
    from hiera.train.common import holdout

    items = [f"q{i}" for i in range(20)]
    kept, held = holdout(items, 0.25, seed=7)
    assert len(held) == 5 and sorted(kept + held) == sorted(items)
    assert kept == [x for x in items if x in kept] and held == [x for x in items if x in held]  # original order
    assert holdout(items, 0.25, seed=7) == (kept, held) and holdout(items, 0.25, seed=8) != (kept, held)
    assert holdout(items, 0.01, seed=7)[1] and holdout(items, 0.0, seed=7) == (items, [])
    assert holdout(["only"], 0.5, seed=7) == (["only"], [])  # a lone question trains; nothing to calibrate on
