"""Where a sharded build runs its work: in this process, or on a Ray cluster.

Both engines offer the same three operations, so :mod:`hiera.shard.build` has
one code path:

* ``run(fn, args, num_returns)`` → one handle per call (the value itself
  in-process, Ray object refs on Ray; a ref passed as an argument of a later
  ``run`` is resolved by Ray on the worker, so token lists and vector slices
  go from task to task through the object store, not through the driver);
* ``get(handle)`` → the value;
* ``encode(model, texts)`` → float32 vectors rounded to float16 (what the
  matrices store), through the encoder's on-disk cache. On Ray: Ray Data
  ``map_batches`` over a pool of actors, one model loaded per actor.

On a cluster of several nodes, tasks are scheduled with Ray's ``SPREAD``
strategy (Ray Data spreads its actors by default), and :meth:`RayEngine.placement`
tells which node ran each task and encoded how many texts (the build logs it).
When a node dies, Ray retries its tasks elsewhere, rebuilds lost task
outputs from their lineage and restarts lost encoding actors; what cannot be
recovered ends the build with one line (:class:`RayBuildError`): the live
index is untouched (the build writes a private directory) and a rerun encodes
only what the embedding cache does not hold yet.

Ray is imported only by :class:`RayEngine`, so hiera works without the ``ray`` extra.
"""

from __future__ import annotations

import socket
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from hiera.encode import DEFAULT_BACKEND, Encoder, default_cache_dir
from hiera.errors import BadInputError, HieraError

ENGINES = ("local", "ray")
ENCODE_BATCH = 256  # texts per Ray Data batch: big enough to amortize a call, small enough to spread
MIN_ENCODE_BATCH = 32


def _rounded(vecs: np.ndarray) -> np.ndarray:
    # the matrices store float16; FAISS must hold exactly those values (as index/build.py does)
    return vecs.astype(np.float16).astype(np.float32)


class LocalEngine:
    """Everything in this process, one shard after another."""

    name = "local"

    def __init__(self, batch_size: int = 32, cache_dir: Path | None = None, progress: bool = False) -> None:
        self.batch_size, self.cache_dir, self.progress = batch_size, cache_dir, progress

    def run(self, fn: Callable[..., Any], args: Sequence[tuple], num_returns: int = 1) -> list[Any]:
        return [fn(*a) for a in args]

    def get(self, handle: Any) -> Any:
        return handle

    def encode(self, model: str, texts: list[str], desc: str, backend: str = DEFAULT_BACKEND) -> np.ndarray:
        enc = Encoder(model, batch_size=self.batch_size, cache_dir=self.cache_dir, backend=backend)
        return _rounded(enc.encode_document(texts, progress=self.progress, desc=desc))

    def placement(self) -> list[dict[str, Any]]:
        return []

    def close(self) -> None:
        pass


class RayBuildError(HieraError):
    """The Ray cluster could not finish a step of the build (a node or worker died beyond Ray's retries)."""


def ray_failure(step: str, exc: BaseException) -> RayBuildError:
    first = (str(exc).strip().splitlines() or [""])[0][:240]
    return RayBuildError(
        f"the Ray build failed during {step}: {type(exc).__name__}: {first}; the live index is unchanged, and a "
        "rerun encodes only what the embedding cache does not hold yet"
    )


def _placed(fn: Callable[..., Any], num_returns: int, *args: Any) -> Any:
    """Run ``fn`` as a Ray task and add the id of the node that ran it as one more return value."""
    import ray

    out = fn(*args)
    node = ray.get_runtime_context().get_node_id()
    return (*out, node) if num_returns > 1 else (out, node)


class EncodeActor:
    """A Ray Data actor: one encoder loaded once, then batch after batch (the cache shared on disk)."""

    def __init__(self, model: str, batch_size: int, cache_dir: str, backend: str = DEFAULT_BACKEND) -> None:
        self.encoder = Encoder(model, batch_size=batch_size, cache_dir=Path(cache_dir), backend=backend)

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        import ray

        vecs = self.encoder.encode_document([str(t) for t in batch["text"]])
        node = ray.get_runtime_context().get_node_id()
        return {"i": batch["i"], "v": _rounded(vecs), "node": np.full(len(vecs), node)}


def connect_ray(address: str | None, reach_timeout: float = 5.0) -> None:
    """``ray.init`` at ``address`` (``auto``, ``HOST:PORT``, ``ray://HOST:PORT``), or a local Ray when None; a failure
    is one line. A ``HOST:PORT`` nothing answers on is refused within ``reach_timeout`` seconds: Ray itself keeps
    retrying an unreachable head for minutes."""
    import ray

    if address and address != "auto":
        host, _, port = address.removeprefix("ray://").rpartition(":")
        if host and port.isdigit():
            try:
                socket.create_connection((host, int(port)), timeout=reach_timeout).close()
            except OSError as e:
                raise HieraError(f"cannot reach the Ray head at {address}: {e.strerror or e} (is `ray start --head` "
                                 "running there, and is the port right?)") from None
    try:
        ray.init(**({"address": address} if address else {"include_dashboard": False}), log_to_driver=False)
    except (ConnectionError, RuntimeError, ValueError) as e:
        raise HieraError(f"cannot start or reach {address or 'a local Ray'}: {str(e).splitlines()[0]}") from None


class RayEngine:
    """Ray tasks per shard and Ray Data encoding; connects to ``address`` or starts a local Ray."""

    name = "ray"

    def __init__(self, address: str | None = None, workers: int | None = None, batch_size: int = 32,
                 cache_dir: Path | None = None, progress: bool = False) -> None:
        try:
            import ray
        except ImportError:
            raise HieraError("--engine ray needs Ray: pip install 'hiera[ray]'") from None
        self.ray = ray
        self.owned = not ray.is_initialized()
        if self.owned:
            connect_ray(address)
        cpus = int(ray.cluster_resources().get("CPU", 1))
        self.workers = max(1, workers or cpus)
        self.batch_size = batch_size
        # resolved here, so that every actor writes the one cache this process would use
        self.cache_dir = str(cache_dir or default_cache_dir())
        self.progress = progress
        self._placed = ray.remote(_placed)
        self._tasks: list[tuple[str, int, Any]] = []  # (task, index, ref of the node id that ran it)
        self._encoded: dict[str, int] = {}  # node id -> texts encoded there

    def run(self, fn: Callable[..., Any], args: Sequence[tuple], num_returns: int = 1) -> list[Any]:
        # SPREAD: the shards' tasks go to different nodes (Ray's default packs a node before using the next)
        out = []
        for i, a in enumerate(args):
            refs = self._placed.options(num_returns=num_returns + 1, num_cpus=1, scheduling_strategy="SPREAD"
                                        ).remote(fn, num_returns, *a)
            self._tasks.append((fn.__name__, i, refs[-1]))
            out.append(refs[:-1] if num_returns > 1 else refs[0])
        return out

    def get(self, handle: Any) -> Any:
        if isinstance(handle, list | tuple):
            return [self.get(h) for h in handle]
        from ray.exceptions import RayError, RayTaskError

        try:
            return self.ray.get(handle)
        except RayTaskError as e:  # the task's own error (a HieraError stays what it is)
            cause = getattr(e, "cause", None)
            if isinstance(cause, HieraError):
                raise cause from None
            raise ray_failure("a shard task", e) from None
        except RayError as e:
            raise ray_failure("a shard task", e) from None

    def placement(self) -> list[dict[str, Any]]:
        """Which node ran each task, and how many texts each node encoded (node ids with Ray's node names)."""
        try:
            names = {n["NodeID"]: n.get("NodeName", "") for n in self.ray.nodes()}
        except Exception:  # noqa: BLE001 - a view for the log: never a reason to fail a finished build
            names = {}
        rows = []
        for task, i, ref in self._tasks:
            try:
                node = self.ray.get(ref, timeout=10)
            except Exception:  # noqa: BLE001 - the node that ran it is gone and the id with it
                node = ""
            rows.append({"task": task, "index": i, "node_id": node, "node_name": names.get(node, "")})
        for node, n in sorted(self._encoded.items()):
            rows.append({"task": "encode", "texts": n, "node_id": node, "node_name": names.get(node, "")})
        return rows

    def encode(self, model: str, texts: list[str], desc: str, backend: str = DEFAULT_BACKEND) -> np.ndarray:
        import ray.data

        ctx = ray.data.DataContext.get_current()
        ctx.enable_progress_bars = self.progress
        actors = min(self.workers, max(1, -(-len(texts) // ENCODE_BATCH)))  # a model load costs seconds
        # at least ~4 batches per actor, so that an actor that starts late (another node) still gets work
        batch = max(MIN_ENCODE_BATCH, min(ENCODE_BATCH, -(-len(texts) // (4 * actors))))
        blocks = max(1, -(-len(texts) // batch))
        ds = ray.data.from_items(
            [{"i": i, "text": t} for i, t in enumerate(texts)], override_num_blocks=min(blocks, 64 * actors)
        )
        ds = ds.map_batches(
            EncodeActor,
            fn_constructor_kwargs={"model": model, "batch_size": self.batch_size, "cache_dir": self.cache_dir,
                                   "backend": backend},
            batch_size=batch, batch_format="numpy", compute=ray.data.ActorPoolStrategy(size=actors),
            num_cpus=1,
        )
        out: np.ndarray | None = None
        from ray.data.exceptions import SystemException
        from ray.exceptions import RayError

        try:
            for batch in ds.iter_batches(batch_size=None, batch_format="numpy"):
                vecs = np.asarray(batch["v"], dtype=np.float32)
                if out is None:
                    out = np.zeros((len(texts), vecs.shape[1]), dtype=np.float32)
                out[np.asarray(batch["i"], dtype=np.int64)] = vecs
                for node, n in zip(*np.unique(batch["node"], return_counts=True), strict=True):
                    self._encoded[str(node)] = self._encoded.get(str(node), 0) + int(n)
        except (RayError, SystemException) as e:
            raise ray_failure(desc, e) from None
        if out is None:
            raise HieraError(f"{desc}: Ray Data returned no vectors")
        return out

    def close(self) -> None:
        if self.owned:
            self.ray.shutdown()


def make_engine(engine: str, *, address: str | None, workers: int | None, batch_size: int,
                cache_dir: Path | None, progress: bool) -> LocalEngine | RayEngine:
    if engine == "local":
        if address:
            raise BadInputError("--ray-address needs --engine ray")
        return LocalEngine(batch_size, cache_dir, progress)
    if engine == "ray":
        return RayEngine(address, workers, batch_size, cache_dir, progress)
    raise BadInputError(f"--engine must be one of {', '.join(ENGINES)}, got {engine!r}")
