"""A running server picks up a new build without a restart, and says why it refuses while the index is stale."""

from __future__ import annotations

import weakref
from pathlib import Path

import helpers
from fastapi.testclient import TestClient

from hiera.corpus.ingest import ingest
from hiera.index.build import BuildOptions, build
from hiera.lock import build_is_open
from hiera.serve import create_app


def _search(client: TestClient, **params) -> tuple[int, dict]:
    r = client.get("/search", params={"q": helpers.TOPIC_QUERIES["jazz"], "retriever": "dhr", **params})
    return r.status_code, r.json()


def test_a_new_build_is_served_without_a_restart(col_copy: Path, tmp_path: Path) -> None:
    root = col_copy
    app = create_app(root, warmup=True)
    service = app.state.service
    with TestClient(app) as client:
        status, body = _search(client)
        assert status == 200 and body["params"]["lam"] != 0.25  # what the new build will change
        first = client.get("/health").json()["build"]
        old = weakref.ref(service.col)
        old_build = service.col.build_dir
        build(root, BuildOptions(progress=False, defaults={"dhr": {"lam": 0.25}}), log=helpers.QUIET)
        service._checked = 0.0  # the server looks at most once a second; do not sleep in a test
        status, body = _search(client)
        assert status == 200 and body["params"]["lam"] == 0.25
        health = client.get("/health").json()
        assert health["build"] != first and health["stale"] is None
        # the build served before is let go at the next look once no search holds it: memory and disk come back
        assert old() is not None
        service._checked = 0.0
        assert _search(client)[0] == 200
        assert old() is None and not build_is_open(old_build)

        # documents ingested but not built: refused with a reason, then served again after the build
        ingest([helpers.write_jsonl(tmp_path / "more.jsonl", helpers.make_extra_docs())], "hiera-jsonl", root,
               progress=False)
        service._checked = 0.0
        status, body = _search(client)
        assert status == 503 and "hiera build" in body["detail"]
        build(root, BuildOptions(progress=False), log=helpers.QUIET)
        service._checked = 0.0
        status, body = _search(client)
        assert status == 200 and client.get("/health").json()["stats"]["documents"] > health["stats"]["documents"]


def test_a_commit_between_the_look_and_the_version_read_is_served_not_called_stale(
    col_copy: Path, tmp_path: Path, monkeypatch
) -> None:
    """`add` swaps its build in and then commits: a look that saw the build before the swap and the version after
    the commit must look again, not refuse searches until the next build."""
    import hiera.serve.service as service_module
    from hiera.cli import main

    root = col_copy
    app = create_app(root)
    service = app.state.service
    before = service.col.build_dir
    src = helpers.write_jsonl(tmp_path / "more.jsonl", helpers.make_extra_docs())
    assert main(["add", str(root), str(src), "--format", "hiera-jsonl", "-q"]) == 0
    real = service_module.live_build_dir
    looks: list[Path | None] = []

    def first_look_before_the_commit(r: Path) -> Path | None:
        looks.append(before if not looks else real(r))
        return looks[-1]

    monkeypatch.setattr(service_module, "live_build_dir", first_look_before_the_commit)
    service.refresh(wait=True)
    assert len(looks) == 2 and service.stale is None
    assert service.col.build_dir == real(root) != before
    with TestClient(app) as client:
        assert _search(client)[0] == 200


def test_a_store_locked_past_the_busy_timeout_is_a_503_to_retry(col_copy: Path, monkeypatch) -> None:
    from hiera.errors import StoreBusyError

    app = create_app(col_copy)
    retriever = app.state.service.retrievers["dhr"]

    def locked(*args, **kwargs):
        raise StoreBusyError("the corpus store of col stayed locked by another process's change for 30 s")

    monkeypatch.setattr(retriever, "search", locked)
    monkeypatch.setattr(retriever, "batch_search", locked)
    with TestClient(app) as client:
        r = client.get("/search", params={"q": helpers.TOPIC_QUERIES["jazz"], "retriever": "dhr"})
    assert r.status_code == 503 and r.headers["retry-after"] == "2"
    assert r.json() == {"detail": "the corpus store of col stayed locked by another process's change for 30 s"}
