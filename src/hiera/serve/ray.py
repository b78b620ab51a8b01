"""``hiera serve COLL --engine ray``: Ray Serve, a router plus one deployment per shard.

* ``shard-NNN`` deployments (``--replicas`` each) hold one shard's indexes
  (:class:`hiera.shard.shard.Shard`) and answer its primitives;
* the ``router`` deployment is the HTTP ingress: the very FastAPI app of
  ``hiera serve`` (:func:`hiera.serve.api.create_app`), over a
  :class:`~hiera.shard.collection.ShardedCollection` whose fan-out calls the
  shard deployments through Serve handles. Query encoding, fusion, hit
  hydration (the corpus store) and JSON happen there, so the API, the page and
  the JSON are those of the single-process server.

When a change becomes visible to the replicas. The shard deployments hold
the shards of the build that was live at deployment; the router opens the
collection's *live* build over them, so what it serves follows the build:

* a removal (``hiera remove``, :func:`hiera.builds.remove_documents`) publishes
  a build that hard-links the same shards and adds ``tombstones.npy`` and a
  new layout at its top (same :attr:`~hiera.index.manifest.Manifest.base_version`,
  same shard entries). The router's service picks it up as ``hiera serve``
  does (:meth:`hiera.serve.service.Service.refresh`: at most a second later, at
  once when the store's corpus version moved), without a redeploy: the router
  masks the removed documents as it applies a filter (the collection's
  ``live`` mask through :mod:`hiera.index.masked`, over the shards' fan-out);
* a change that adds text (``hiera add``, a replaced document), a removal
  that compacts (dead rows past :data:`~hiera.index.segments.COMPACT_AT`) and
  ``hiera build`` rebuild a sharded build into new shards: the router then
  refuses searches (503, like a stale index, one line saying to redeploy)
  until the application is redeployed with ``hiera serve --engine ray``.

A shard replica that Serve restarts after a removal opens its shard from the
live build when the build it was deployed with has been removed (its files are
the same, checked against the build's record of the shard).
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from hiera.errors import HieraError, IndexMissingError, ShardUnavailableError
from hiera.index.manifest import SHARDS_DIR, Manifest
from hiera.index.publish import live_build_dir
from hiera.models import passive_threads
from hiera.serve.guard import SHARD_TIMEOUT_S
from hiera.shard.engine import connect_ray
from hiera.shard.fanout import current_calls, settle
from hiera.shard.shard import Shard

APP_NAME = "hiera"


class ShardServer:
    """The body of a shard deployment: one shard, opened checked and warmed up at start.

    ``root``: the collection. A replica (re)started after a removal published a
    new build, and the deployed build was removed, opens the shard from the
    live build instead: a removal links the shards unchanged, and the shard is
    opened checked against ``entry``, so a rebuilt shard is still refused.
    """

    def __init__(self, build_dir: str, entry: dict[str, Any], corpus_version: int, vectors: str = "float16",
                 root: str | None = None) -> None:
        build = Path(build_dir)
        if root is not None and not (build / SHARDS_DIR / entry["name"]).is_dir():
            build = live_build_dir(Path(root)) or build
        self.shard = Shard(build, entry, corpus_version, vectors=vectors)
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

    def score_candidates(self, *a: Any) -> Any:
        return self.shard.score_candidates(*a)

    def row_range(self, *a: Any) -> Any:
        return self.shard.row_range(*a)

    def warmup(self) -> bool:
        return self.shard.warmup()


DEFAULT_SHARD_TIMEOUT_S = SHARD_TIMEOUT_S  # longest wait for one shard call; a request's own deadline can shorten it
PROBE_TIMEOUT_S = 1.0  # the wait for a shard that just failed, until it answers again (no pile-up behind a dead shard)


def failure_reason(exc: BaseException, waited: float) -> str:
    """One line for a shard call that got no answer."""
    if isinstance(exc, TimeoutError):
        return f"no answer within {waited:.1f} s"
    first = (str(exc).strip().splitlines() or [""])[0]
    return f"{type(exc).__name__}: {first[:160]}" if first else type(exc).__name__


class RayFanOut:
    """Fan-out over shard deployments: all requests sent, then all awaited (from a worker thread), each with a deadline.

    A shard that does not answer in time, or whose replica or node died, is
    reported to :func:`hiera.shard.fanout.settle`: the search fails with a
    :class:`~hiera.errors.ShardUnavailableError` (503), or, for a request that
    asked for partial results and a call that can merge without it, the shard
    is left out and named. An error the shard's own code raised (a
    :class:`HieraError`) is raised as it would be in one process.

    Serve re-routes a request whose replica died to the replacement replica
    once it is up; the wait is bounded here by ``timeout`` (and by the
    request's deadline). After a failure the shard is *suspect*: calls to it
    wait only ``probe_timeout`` until it answers again, so that requests do
    not queue for the full timeout behind a shard that is known to be down.
    """

    def __init__(self, handles: Sequence[Any], build_dir: Path, names: Sequence[str] | None = None,
                 timeout: float = DEFAULT_SHARD_TIMEOUT_S, probe_timeout: float = PROBE_TIMEOUT_S) -> None:
        self.handles = list(handles)
        self.n = len(self.handles)
        self.build_dir = build_dir
        self.names = list(names) if names is not None else [f"{i:03d}" for i in range(self.n)]
        self.timeout, self.probe_timeout = timeout, probe_timeout
        self._suspect: dict[int, float] = {}  # shard -> when it last failed
        self._lock = threading.Lock()

    def _wait(self, i: int) -> float:
        with self._lock:
            t = self.probe_timeout if i in self._suspect else self.timeout
        calls = current_calls()
        left = calls.remaining() if calls is not None else None
        return t if left is None else min(t, left)

    def call(self, method: str, args: Sequence[tuple | None], *, partial_ok: bool = False) -> list[Any]:
        from ray.exceptions import RayError, RayTaskError
        from ray.serve.exceptions import RayServeException

        sent = {i: getattr(h, method).remote(*a) for i, (h, a) in enumerate(zip(self.handles, args, strict=True))
                if a is not None}
        out: list[Any] = [None] * self.n
        failed: dict[int, str] = {}
        t0 = time.monotonic()
        for i, r in sent.items():
            wait = self._wait(i)
            try:
                out[i] = r.result(timeout_s=max(0.0, wait - (time.monotonic() - t0)))
            except RayTaskError as e:  # the shard answered with an error: what one process would raise
                self._answered(i)
                cause = getattr(e, "cause", None)
                if isinstance(cause, HieraError):
                    raise cause from None
                raise
            except (TimeoutError, RayError, RayServeException) as e:
                r.cancel()  # a request still queued for a replica must not run after the answer went out
                failed[i] = failure_reason(e, wait)
                with self._lock:
                    self._suspect[i] = time.monotonic()
            else:
                self._answered(i)
        settle(self.names, len(sent), failed, partial_ok)
        return out

    def _answered(self, i: int) -> None:
        if i in self._suspect:
            with self._lock:
                self._suspect.pop(i, None)

    def close(self) -> None:
        pass


class Router:
    """The ingress deployment: builds hiera's FastAPI app over the remote shards at replica start.

    ``deployed``: the deployed build's ``shards`` (its manifest's entries) and
    ``base_version``, which the shard deployments hold; read from
    ``build_dir`` when not given. The router serves any live build with those
    shards (the deployed one, or one a removal made from it), and refuses one
    with other shards.
    """

    def __init__(self, root: str, build_dir: str, handles: list[Any], app_options: dict[str, Any],
                 fan_options: dict[str, Any] | None = None, deployed: dict[str, Any] | None = None) -> None:
        self.root, self.build_dir, self.handles, self.app_options = Path(root), Path(build_dir), handles, app_options
        self.fan_options = fan_options or {}
        if deployed is None:
            m = Manifest.read(self.build_dir)
            deployed = {"shards": m.shards, "base_version": m.base_version}
        self.shards = [dict(e) for e in deployed["shards"]]
        self.base_version = int(deployed["base_version"])

    def _differs(self, build_dir: Path, m: Manifest) -> str | None:
        """Why the shards of the build at ``build_dir`` are not the deployed ones, or ``None``.

        Told by the manifests, not by the path: the build a removal made from
        the deployed one has another path and the same shards.
        """
        if not m.shards:
            return f"its live build {build_dir.name} is not sharded"
        if m.base_version != self.base_version or [dict(e) for e in m.shards] != self.shards:
            return f"its live build {build_dir.name} has other shards"
        return None

    def _refuse(self, root: Path, why: str) -> HieraError:
        return HieraError(
            f"{root} was rebuilt since its shards were deployed ({why}; the shards serve {self.build_dir.name}); "
            "redeploy with `hiera serve --engine ray`"
        )

    def _open(self, root: Path, **kwargs: Any) -> Any:
        """The collection over the live build, searched on the deployed shards (refused when its shards differ)."""
        from hiera.shard.collection import ShardedCollection

        live = live_build_dir(root)
        if live is None:
            raise IndexMissingError(f"{root} has no index; run `hiera build {root} --shards N`")
        why = self._differs(live, Manifest.read(live))
        if why is not None:
            raise self._refuse(root, why)
        fan = RayFanOut(self.handles, live, **self.fan_options)
        col = ShardedCollection(root, fanout=fan, **kwargs)
        opened = col.view.build_dir
        if opened != live:  # another change was published in between: the build the collection opened must pass too
            why = self._differs(opened, col.view.manifest)
            if why is not None:
                raise self._refuse(root, why)
            fan.build_dir = opened
        return col

    async def __serve_build_asgi_app__(self) -> Any:
        from hiera.serve.api import create_app

        options = dict(self.app_options)
        warm = options.pop("warmup", True)
        app = create_app(self.root, warmup=False, opener=self._open, **options)
        if warm:  # handle calls block: not on the replica's event loop
            await asyncio.to_thread(warm_up, app.state.service)
        return app


WARMUP_WAIT_S = 600.0  # shard replicas start beside the router: its warm-up waits for them this long


def warm_up(service: Any, wait: float = WARMUP_WAIT_S) -> None:
    """Warm the router up once every shard answers (they may still be loading when the router starts)."""
    deadline = time.monotonic() + wait
    while True:
        try:
            service.warmup()
            return
        except ShardUnavailableError:
            if time.monotonic() > deadline:
                raise
            time.sleep(1.0)


def live_shards(root: Path) -> tuple[Path, Manifest]:
    build_dir = live_build_dir(root)
    if build_dir is None:
        raise IndexMissingError(f"{root} has no index; run `hiera build {root} --shards N`")
    m = Manifest.read(build_dir)
    if not m.shards:
        raise HieraError(f"{root} is not sharded: `hiera serve --engine ray` serves builds made with --shards N")
    return build_dir, m


def alive_nodes() -> list[dict[str, Any]]:
    import ray

    return [n for n in ray.nodes() if n.get("Alive")]


def deploy(
    root: Path, *, host: str = "127.0.0.1", port: int = 8000, replicas: int = 1, shard_cpus: float = 1.0,
    router_cpus: float = 1.0, vectors: str = "float16", warmup: bool = True, app_options: dict[str, Any] | None = None,
    name: str = APP_NAME, shard_timeout: float = DEFAULT_SHARD_TIMEOUT_S, spread: bool = True,
) -> str:
    """Deploy the collection's live sharded build on the connected Ray cluster; returns the HTTP URL.

    ``spread``: with ``replicas`` > 1 and at least that many nodes, the
    replicas of one shard go to different nodes (Serve's
    ``max_replicas_per_node=1``), so that losing a node leaves every shard
    answering. Replicas of different shards are spread by Serve's default
    (SPREAD) scheduling as far as their CPU reservations allow.
    """
    from ray import serve

    root = Path(root).resolve()
    build_dir, m = live_shards(root)
    if replicas < 1:
        raise HieraError(f"--replicas must be at least 1, got {replicas}")
    if not shard_timeout > 0:
        raise HieraError(f"--shard-timeout must be positive, got {shard_timeout}")
    per_node = 1 if spread and replicas > 1 and len(alive_nodes()) >= replicas else None
    serve.start(http_options={"host": host, "port": port})
    env = {"env_vars": passive_threads()}  # replicas are new processes: their OpenMP runtimes read it at load
    shard_apps = [
        serve.deployment(ShardServer, name=f"shard-{e['name']}", num_replicas=replicas, max_replicas_per_node=per_node,
                         ray_actor_options={"num_cpus": shard_cpus, "runtime_env": env}
                         ).bind(str(build_dir), e, m.base_version, vectors, str(root))
        for e in m.shards
    ]
    router = serve.deployment(serve.ingress()(Router), name="router",
                              ray_actor_options={"num_cpus": router_cpus, "runtime_env": env})
    options = {"vectors": vectors, "warmup": warmup, **(app_options or {})}
    fan = {"names": [e["name"] for e in m.shards], "timeout": shard_timeout}
    deployed = {"shards": m.shards, "base_version": m.base_version}
    serve.run(router.bind(str(root), str(build_dir), shard_apps, options, fan, deployed), name=name,
              route_prefix="/", blocking=False)
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}/"


def placement(name: str = APP_NAME) -> list[dict[str, Any]]:
    """Where each replica of the application runs: deployment, node id and name, pid (from Ray's actor table).

    Informational (printed by ``hiera serve --engine ray``, recorded by the
    benchmarks); ``[]`` when the actor table cannot be read.
    """
    import ray

    try:
        from ray._private import state  # the GCS actor table; ray.util.state needs the dashboard, often off

        actors = state.actors()
        nodes = {n["NodeID"]: n.get("NodeName", "") for n in ray.nodes()}
    except Exception:  # noqa: BLE001 - a view of the cluster, never a reason to fail
        return []
    prefix = f"SERVE_REPLICA::{name}#"
    out = []
    for info in actors.values():
        actor_name = info.get("Name") or ""
        if not actor_name.startswith(prefix) or info.get("State") != "ALIVE":
            continue
        deployment, _, replica = actor_name[len(prefix):].partition("#")
        node = (info.get("Address") or {}).get("NodeID", "")
        out.append({"deployment": deployment, "replica": replica, "node_id": node, "node_name": nodes.get(node, ""),
                    "pid": info.get("Pid")})
    return sorted(out, key=lambda r: (r["deployment"], r["node_id"]))


def placement_lines(rows: list[dict[str, Any]]) -> list[str]:
    if not rows:
        return ["placement: unknown (Ray's actor table could not be read)"]
    return [f"placement: {r['deployment']} replica {r['replica']} on node {r['node_name'] or '?'} "
            f"({r['node_id'][:12]}), pid {r['pid']}" for r in rows]


class HeadWatch:
    """Tells when the Ray cluster this process joined is gone: its head node died, or was replaced by a new head.

    Ray keeps the cluster's state in the head's GCS; without GCS fault
    tolerance (an external Redis) a restarted head is a new, empty cluster:
    the Serve application, its replicas and the worker nodes went with the old
    one, and this process cannot rejoin. ``check`` asks the GCS for the node
    table in a helper thread, so a GCS that does not answer cannot block the
    caller; ``lost`` is the reason once the cluster is gone.
    """

    def __init__(self, grace: float = 20.0) -> None:
        heads = [n["NodeID"] for n in alive_nodes() if "node:__internal_head__" in n.get("Resources", {})]
        self.head = heads[0] if heads else None
        self.grace = grace
        self._last_ok = time.monotonic()
        self._pending: Any = None
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="hiera-headwatch")

    def check(self) -> str | None:
        """``None`` while the cluster is there, else why it is not (one line)."""
        if self._pending is None:
            self._pending = self._pool.submit(alive_nodes)
        if not self._pending.done():
            waited = time.monotonic() - self._last_ok
            return f"the Ray head has not answered for {waited:.0f} s" if waited > self.grace else None
        fut, self._pending = self._pending, None
        try:
            nodes = fut.result()
        except Exception as e:  # noqa: BLE001 - whatever the GCS client raises, the head is unreachable
            waited = time.monotonic() - self._last_ok
            why = (str(e).strip().splitlines() or [type(e).__name__])[0][:160]
            return f"the Ray head does not answer ({why})" if waited > self.grace else None
        if self.head is not None and self.head not in {n["NodeID"] for n in nodes}:
            return f"the Ray head node {self.head[:12]} is gone (the cluster was restarted)"
        self._last_ok = time.monotonic()
        return None


def serve_forever(root: Path, address: str | None, *, watch_every: float = 2.0, **kwargs: Any) -> int:
    """``hiera serve --engine ray``: connect (or start a local Ray), deploy, block until Ctrl-C / SIGTERM.

    The placement of every replica is printed once the application is up. If
    the cluster's head is lost (killed, restarted), the application is gone
    with it: the command says so on one line and exits 2 at once, without the
    clean-up calls that would wait on the dead head, so that a supervisor
    (systemd, Kubernetes) starts it again against the restarted cluster.
    """
    import os
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
        connect_ray(address)
    stop = {"now": False}

    def _stop(*_: Any) -> None:
        stop["now"] = True

    previous = signal.signal(signal.SIGTERM, _stop)
    name = kwargs.get("name", APP_NAME)
    try:
        url = deploy(Path(root), **kwargs)
        for line in placement_lines(placement(name)):
            print(f"hiera: {line}", file=sys.stderr, flush=True)
        print(f"hiera: serving {root} with Ray Serve at {url} (API docs at {url}docs); Ctrl-C stops",
              file=sys.stderr, flush=True)
        watch = HeadWatch()
        checked = time.monotonic()
        while not stop["now"]:
            time.sleep(0.5)
            if watch_every <= 0 or time.monotonic() - checked < watch_every:
                continue
            checked = time.monotonic()
            lost = watch.check()
            if lost:
                print(f"hiera: error: lost the Ray cluster{f' at {address}' if address else ''}: {lost}; Ray Serve "
                      "and its replicas went with it; start `hiera serve --engine ray` again once the head is back",
                      file=sys.stderr, flush=True)
                os._exit(2)  # ray.shutdown() and serve.delete() would wait on the dead head
    except KeyboardInterrupt:
        pass
    finally:
        signal.signal(signal.SIGTERM, previous)
        _bounded(lambda: serve.delete(name), 30.0)  # nothing was deployed (deploy failed): a no-op
        if owned:
            _bounded(serve.shutdown, 30.0)
            _bounded(ray.shutdown, 30.0)
    return 0


def _bounded(fn: Any, seconds: float) -> None:
    """Run a clean-up call for at most ``seconds`` (a call into a cluster that is gone would block forever)."""
    t = threading.Thread(target=_quiet(fn), daemon=True)
    t.start()
    t.join(seconds)


def _quiet(fn: Any) -> Any:
    def run() -> None:
        try:
            fn()
        except Exception:  # noqa: BLE001 - clean-up on the way out: nothing left to tell
            pass

    return run
