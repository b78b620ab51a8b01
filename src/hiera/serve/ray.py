"""``hiera serve COLL --engine ray``: Ray Serve, a router plus one deployment per shard.

* ``shard-NNN`` deployments (``--replicas`` each) hold one shard's indexes
  (:class:`hiera.shard.shard.Shard`) and answer its primitives;
* the ``router`` deployment is the HTTP ingress: the very FastAPI app of
  ``hiera serve`` (:func:`hiera.serve.api.create_app`), over a
  :class:`~hiera.shard.collection.ShardedCollection` whose fan-out calls the
  shard deployments through Serve handles. Query encoding, fusion, hit
  hydration (the corpus store) and JSON happen there, so the API, the page and
  the JSON are those of the single-process server.

The deployments serve the build that was live at deployment; when the
collection is rebuilt, the router refuses searches (503, like a stale index)
until the application is redeployed.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hiera.errors import HieraError, IndexMissingError
from hiera.index.manifest import Manifest
from hiera.index.publish import live_build_dir
from hiera.models import passive_threads
from hiera.shard.shard import Shard

APP_NAME = "hiera"


class ShardServer:
    """The body of a shard deployment: one shard, opened checked and warmed up at start."""

    def __init__(self, build_dir: str, entry: dict[str, Any], corpus_version: int, vectors: str = "float16") -> None:
        self.shard = Shard(Path(build_dir), entry, corpus_version, vectors=vectors)
        self.shard.warmup()

    def bm25_search(self, *a: Any) -> Any:
        return self.shard.bm25_search(*a)

    def bm25_scores(self, *a: Any) -> Any:
        return self.shard.bm25_scores(*a)

    def bm25_scores_at(self, *a: Any) -> Any:
        return self.shard.bm25_scores_at(*a)

    def faiss_search(self, *a: Any) -> Any:
        return self.shard.faiss_search(*a)

    def rows(self, *a: Any) -> Any:
        return self.shard.rows(*a)

    def passage_lists(self, *a: Any) -> Any:
        return self.shard.passage_lists(*a)

    def row_range(self, *a: Any) -> Any:
        return self.shard.row_range(*a)

    def warmup(self) -> bool:
        return self.shard.warmup()


class RayFanOut:
    """Fan-out over shard deployments: all requests sent, then all awaited (from a worker thread)."""

    def __init__(self, handles: Sequence[Any], build_dir: Path) -> None:
        self.handles = list(handles)
        self.n = len(self.handles)
        self.build_dir = build_dir

    def call(self, method: str, args: Sequence[tuple | None]) -> list[Any]:
        sent = [getattr(h, method).remote(*a) if a is not None else None for h, a in zip(self.handles, args, strict=True)]
        return [r.result() if r is not None else None for r in sent]

    def close(self) -> None:
        pass


class Router:
    """The ingress deployment: builds hiera's FastAPI app over the remote shards at replica start."""

    def __init__(self, root: str, build_dir: str, handles: list[Any], app_options: dict[str, Any]) -> None:
        self.root, self.build_dir, self.handles, self.app_options = Path(root), Path(build_dir), handles, app_options

    def _open(self, root: Path, **kwargs: Any) -> Any:
        from hiera.shard.collection import ShardedCollection

        if live_build_dir(root) != self.build_dir:
            raise HieraError(
                f"{root} was rebuilt since its shards were deployed (serving {self.build_dir.name}); "
                "redeploy with `hiera serve --engine ray`"
            )
        return ShardedCollection(root, fanout=RayFanOut(self.handles, self.build_dir), **kwargs)

    async def __serve_build_asgi_app__(self) -> Any:
        from hiera.serve.api import create_app

        options = dict(self.app_options)
        warm = options.pop("warmup", True)
        app = create_app(self.root, warmup=False, opener=self._open, **options)
        if warm:  # handle calls block: not on the replica's event loop
            await asyncio.to_thread(app.state.service.warmup)
        return app


def live_shards(root: Path) -> tuple[Path, Manifest]:
    build_dir = live_build_dir(root)
    if build_dir is None:
        raise IndexMissingError(f"{root} has no index; run `hiera build {root} --shards N`")
    m = Manifest.read(build_dir)
    if not m.shards:
        raise HieraError(f"{root} is not sharded: `hiera serve --engine ray` serves builds made with --shards N")
    return build_dir, m


def deploy(
    root: Path, *, host: str = "127.0.0.1", port: int = 8000, replicas: int = 1, shard_cpus: float = 1.0,
    router_cpus: float = 1.0, vectors: str = "float16", warmup: bool = True, app_options: dict[str, Any] | None = None,
    name: str = APP_NAME,
) -> str:
    """Deploy the collection's live sharded build on the connected Ray cluster; returns the HTTP URL."""
    from ray import serve

    root = Path(root).resolve()
    build_dir, m = live_shards(root)
    if replicas < 1:
        raise HieraError(f"--replicas must be at least 1, got {replicas}")
    serve.start(http_options={"host": host, "port": port})
    env = {"env_vars": passive_threads()}  # replicas are new processes: their OpenMP runtimes read it at load
    shard_apps = [
        serve.deployment(ShardServer, name=f"shard-{e['name']}", num_replicas=replicas,
                         ray_actor_options={"num_cpus": shard_cpus, "runtime_env": env}
                         ).bind(str(build_dir), e, m.corpus_version, vectors)
        for e in m.shards
    ]
    router = serve.deployment(serve.ingress()(Router), name="router",
                              ray_actor_options={"num_cpus": router_cpus, "runtime_env": env})
    options = {"vectors": vectors, "warmup": warmup, **(app_options or {})}
    serve.run(router.bind(str(root), str(build_dir), shard_apps, options), name=name, route_prefix="/",
              blocking=False)
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}/"


def serve_forever(root: Path, address: str | None, **kwargs: Any) -> int:
    """``hiera serve --engine ray``: connect (or start a local Ray), deploy, block until Ctrl-C / SIGTERM."""
    import signal
    import sys

    live_shards(Path(root))  # refused before Ray is imported or started
    try:
        import ray
        from ray import serve
    except ImportError:
        raise HieraError("--engine ray needs Ray: pip install 'hiera[ray]'") from None
    owned = not ray.is_initialized()
    if owned:
        ray.init(**({"address": address} if address else {"include_dashboard": False}), log_to_driver=False)
    stop = {"now": False}

    def _stop(*_: Any) -> None:
        stop["now"] = True

    previous = signal.signal(signal.SIGTERM, _stop)
    try:
        url = deploy(Path(root), **kwargs)
        print(f"hiera: serving {root} with Ray Serve at {url} (API docs at {url}docs); Ctrl-C stops",
              file=sys.stderr, flush=True)
        while not stop["now"]:
            time.sleep(0.5)
    except KeyboardInterrupt:
        pass
    finally:
        signal.signal(signal.SIGTERM, previous)
        try:
            serve.delete(kwargs.get("name", APP_NAME))
        except Exception:  # noqa: BLE001 - nothing was deployed (deploy failed); stopping anyway
            pass
        if owned:
            serve.shutdown()
            ray.shutdown()
    return 0
