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
