"""Crash safety at small scale (the full trials: ``python -m bench.reliability``, docs/RELIABILITY.md).

Real ``hiera`` subprocesses on a seeded synthetic BM25 collection, SIGKILLed at
fixed moments after they start writing (retried sooner when the command
finished first: a trial whose kill never lands fails); afterwards ``hiera
check`` finds no error, the observable state is exactly the one before or
after the command, and a rerun completes. Disk full: a one-line error and the old state.
"""

from __future__ import annotations

import sys
from pathlib import Path

import helpers
import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench import reliability as rel  # noqa: E402
from hiera.errors import HieraError  # noqa: E402


@pytest.fixture(scope="module")
def fixtures(tmp_path_factory: pytest.TempPathFactory) -> dict[str, rel.Fixture]:
    work = tmp_path_factory.mktemp("reliability")
    env = rel.run_env(work / "cache")
    out = {fx.name: fx for fx in rel.make_fixtures(work, n_docs=150, n_dense_docs=0, seed=1, with_dense=False)}
    for fx in out.values():
        rel.prepare(fx, work, env)
    out["_work"] = work  # type: ignore[assignment]
    return out


@pytest.mark.parametrize("name", ["ingest", "add", "build"])
@pytest.mark.parametrize("fraction", [0.0, 0.4, 0.8])
def test_sigkill_leaves_before_or_after(fixtures, name: str, fraction: float) -> None:
    fx, work = fixtures[name], fixtures["_work"]
    env = rel.run_env(work / "cache")
    delay = fraction * max(0.05, fx.clean_s - fx.to_marker_s)
    o = rel.landed_kill_trial(fx, f"t{fraction}", work, env, after_marker=True, delay=delay)
    # the kill ended the command (it had not finished): otherwise "after" would only say that it ran to the end
    assert o.killed and not o.missed, o.note
    assert o.state in ("before", "after"), o
    assert o.check_errors == []
    assert o.rerun_ok and o.rerun_state == "after", o.note


@pytest.mark.parametrize("name", ["ingest", "build"])
def test_disk_full_is_one_line_and_changes_nothing(fixtures, name: str) -> None:
    fx, work = fixtures[name], fixtures["_work"]
    o, message = rel.disk_full_trial(fx, 65536, work, rel.run_env(work / "cache"))
    assert o.state == "before" and o.check_errors == [], o
    assert message.startswith("hiera: error: cannot write the ")
    assert "unchanged" in message or "untouched" in message
    assert o.rerun_ok and o.rerun_state == "after"


def test_second_writer_refused_then_stale_lock_cleared(fixtures) -> None:
    fx, work = fixtures["build"], fixtures["_work"]
    ok, message = rel.two_writers_trial(fx, 0, work, rel.run_env(work / "cache"))
    assert ok, message


@pytest.mark.parametrize(("compact_at", "step"), [("1", "write_segment"), ("0.01", "_build_into")])
def test_failed_build_inside_add_rolls_the_ingest_back(bm25_copy: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                       capsys, compact_at: str, step: str) -> None:
    """``hiera add`` updates the build inside the ingest's transaction: a failure leaves documents and index as they were.

    Both ways a change publishes fail here: a delta segment, and (past ``--compact-at``) a rewrite of the build.
    """
    from hiera.cli import main
    from hiera.index import update as update_mod
    from hiera.index.publish import live_build_dir

    root = bm25_copy
    before, live = helpers.export_digest(root), live_build_dir(root)
    src = helpers.write_jsonl(tmp_path / "extra.jsonl", helpers.make_extra_docs())

    def boom(*a, **k):
        raise HieraError("simulated failure while building")

    monkeypatch.setattr(update_mod, step, boom)
    assert main(["add", str(root), str(src), "--format", "hiera-jsonl", "--compact-at", compact_at, "-q"]) == 2
    assert "simulated failure" in capsys.readouterr().err
    assert helpers.export_digest(root) == before and live_build_dir(root) == live
    assert sorted(p.name for p in (root / "builds").iterdir() if p.is_dir()) == [live.name]


@pytest.mark.slow
def test_full_fault_trials(tmp_path: Path) -> None:
    """The document's trials at full count: 20 random kills per command, dense ones included (≈ 30 min)."""
    rc = rel.main([
        "--trials", "20", "--dense-trials", "20", "--fuzz", "none", "--work", str(tmp_path / "w"),
        "--out", str(tmp_path / "reliability.json"), "--no-doc",
    ])
    assert rc == 0, (tmp_path / "reliability.json").read_text()


def test_add_killed_between_its_swap_and_its_commit_serves_the_state_before(bm25_copy: Path, tmp_path: Path) -> None:
    """The swap and the SQLite commit are two steps: between them readers, ``check`` and the next writer see "before"."""
    from hiera.builds import build_collection, open_collection
    from hiera.check import check_collection
    from hiera.cli import main
    from hiera.corpus.ingest import ingest
    from hiera.index.build import BuildOptions
    from hiera.index.manifest import Manifest
    from hiera.index.publish import BUILDS, INDEX_LINK, PENDING, live_build_dir

    root = bm25_copy
    before, live = helpers.export_digest(root), live_build_dir(root)
    opts = BuildOptions.from_manifest(Manifest.read(live))
    opts.progress = False
    src = helpers.write_jsonl(tmp_path / "extra.jsonl", helpers.make_extra_docs())

    class Killed(BaseException):
        """Stands for the SIGKILL: raised after the swap, before COMMIT (the transaction rolls back as a kill's does)."""

    def build_then_die(store) -> None:
        build_collection(root, opts, log=helpers.QUIET, store=store)
        assert (root / INDEX_LINK).resolve() != live and (root / BUILDS / PENDING).exists()
        raise Killed

    with pytest.raises(Killed):
        ingest([src], "hiera-jsonl", root, progress=False, before_commit=build_then_die)
    assert (root / INDEX_LINK).resolve() != live  # the link was swapped, the documents were not committed
    assert helpers.export_digest(root) == before
    assert live_build_dir(root) == live  # ... so readers are served the build that matches the store
    with open_collection(root) as col:
        assert col.manifest.corpus_version == col.store.version
    findings = check_collection(root)
    assert not [f.line() for f in findings if f.status == "error"], [f.line() for f in findings]
    assert any("never committed" in f.detail for f in findings)
    # another writer commits documents meanwhile (the corpus version moves on): the add's build is still not theirs
    other = helpers.write_jsonl(tmp_path / "other.jsonl", helpers.make_extra_docs()[:1])
    ingest([other], "hiera-jsonl", root, progress=False)
    assert live_build_dir(root) == live

    # the next writer puts the link back, drops the marker and completes
    assert main(["add", str(root), str(src), "--format", "hiera-jsonl", "-q"]) == 0
    assert not (root / BUILDS / PENDING).exists()
    after = live_build_dir(root)
    assert after != live and (root / INDEX_LINK).resolve() == after
    assert Manifest.read(after).corpus_version == open_collection(root).store.version
    assert sorted(p.name for p in (root / BUILDS).iterdir() if p.is_dir()) == [after.name]
