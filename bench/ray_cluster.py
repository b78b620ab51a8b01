"""A multi-node Ray cluster on one machine: a head and worker nodes started with ``ray start``, as on real machines.

Each node is one ``ray start --block`` process (its own node id, node name,
CPUs, custom resource ``node:<name>``-style label, object store and temp
directory), so the commands are the ones docs/SCALING.md gives for a real
cluster; only the ports differ (every node of one machine needs its own).
``--block`` keeps each node's processes under a process we own: stopping a
node is terminating that process (Ray then stops the node's raylet, object
store and workers), and every node runs in its own process group, which is
killed afterwards so that nothing of ours outlives :meth:`LocalRayCluster.stop`.
Nothing here calls ``ray stop``, which would stop every Ray on the machine.

Faults: :meth:`LocalRayCluster.kill_node` SIGKILLs a node's raylet (its
``ray start`` then tears the rest of the node down, as when a machine dies);
:meth:`LocalRayCluster.restart_head` stops the head and starts a new one on the
same port (the old cluster's state is gone: Ray keeps GCS state only with an
external Redis).

    python -m bench.ray_cluster --workers 2 --seconds 600   # a cluster for manual tries; prints its address

Token authentication is off (``RAY_AUTH_MODE=disabled``) for these local
clusters: everything binds this machine only. Drivers joining it need the
same setting (:meth:`LocalRayCluster.env`).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

NODES_SCRIPT = """
import json, sys
import ray
ray.init(address=sys.argv[1], log_to_driver=False, logging_level="ERROR")
print(json.dumps([{"name": n["NodeName"], "id": n["NodeID"], "resources": n["Resources"]} for n in ray.nodes() if n["Alive"]]))
ray.shutdown()
"""
RAY_ENV = {"RAY_AUTH_MODE": "disabled", "RAY_USAGE_STATS_ENABLED": "0"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def ray_cli() -> str:
    """The ``ray`` script of this interpreter's environment (not whatever ``ray`` is first on PATH)."""
    here = Path(sys.executable).parent / "ray"
    return str(here) if here.exists() else (shutil.which("ray") or "ray")


def alive(pid: int) -> bool:
    """Running (a zombie, or a pid gone, is not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2 :].split()[0] != "Z"


def descendants(pid: int) -> list[int]:
    out = []
    for c, _ in children(pid):
        out += [c, *descendants(c)]
    return out


def children(pid: int) -> list[tuple[int, str]]:
    """(pid, command name) of the direct children of ``pid``, from /proc."""
    out = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            stat = (d / "stat").read_text()
        except OSError:
            continue
        # pid (comm) state ppid ...: comm may contain spaces, so split after the last ')'
        comm = stat[stat.index("(") + 1 : stat.rindex(")")]
        ppid = int(stat[stat.rindex(")") + 2 :].split()[1])
        if ppid == pid:
            out.append((int(d.name), comm))
    return out


@dataclass
class Node:
    name: str
    head: bool
    cpus: float
    temp_dir: Path
    args: list[str]
    proc: subprocess.Popen | None = None
    log: Path | None = None
    resources: dict[str, float] = field(default_factory=dict)
    node_id: str = ""  # Ray's id of the running node (set by wait_nodes)

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def raylet_pid(self) -> int | None:
        if self.proc is None:
            return None
        for pid, comm in children(self.proc.pid):
            if comm == "raylet":
                return pid
        return None


class LocalRayCluster:
    """A head and ``workers`` worker nodes on 127.0.0.1, each a ``ray start --block`` process; always :meth:`stop` it."""

    def __init__(self, workers: int = 2, *, worker_cpus: float = 1, head_cpus: float = 1,
                 object_store_mb: int = 200, root: Path | None = None, env: dict[str, str] | None = None,
                 start_timeout: float = 120.0) -> None:
        if workers < 0:
            raise ValueError("workers must be ≥ 0")
        self.root = Path(root) if root else Path(tempfile.mkdtemp(prefix="hiera-rc-", dir="/tmp"))  # short: unix sockets
        self.owns_root = root is None
        self.port = free_port()
        self.object_store = int(object_store_mb) * 1024 * 1024
        self.start_timeout = start_timeout
        self.base_env = {**os.environ, **RAY_ENV, **(env or {})}
        self.nodes: dict[str, Node] = {}
        self.dead_ids: set[str] = set()  # ids of nodes we stopped or killed (Ray may list them alive for a moment)
        self._add("head", head_cpus, head=True)
        for i in range(1, workers + 1):
            self._add(f"w{i}", worker_cpus, head=False)

    # -- starting ------------------------------------------------------------------------------------
    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def env(self) -> dict[str, str]:
        """The environment a driver joining this cluster needs (``hiera build --ray-address …`` in a subprocess)."""
        return dict(self.base_env)

    def _add(self, name: str, cpus: float, head: bool) -> None:
        node = Node(name, head, cpus, self.root / name, [], resources={f"hiera_node_{name}": 1.0})
        self.nodes[name] = node

    def _args(self, node: Node) -> list[str]:
        ports = [f"--dashboard-agent-listen-port={free_port()}", f"--dashboard-agent-grpc-port={free_port()}",
                 f"--metrics-export-port={free_port()}", f"--runtime-env-agent-port={free_port()}"]
        common = ["--block", "--disable-usage-stats", "--node-ip-address=127.0.0.1", f"--node-name={node.name}",
                  f"--num-cpus={node.cpus:g}", f"--resources={json.dumps(node.resources)}",
                  f"--object-store-memory={self.object_store}", f"--temp-dir={node.temp_dir}", *ports]
        if node.head:
            return ["--head", f"--port={self.port}", "--include-dashboard=false", f"--dashboard-port={free_port()}",
                    f"--ray-client-server-port={free_port()}", *common]
        return [f"--address={self.address}", *common]

    def _launch(self, node: Node) -> None:
        node.temp_dir.mkdir(parents=True, exist_ok=True)
        node.args = self._args(node)
        node.node_id = ""
        node.log = self.root / f"{node.name}.log"
        with node.log.open("a") as log:
            node.proc = subprocess.Popen([ray_cli(), "start", *node.args], env=self.base_env, stdout=log,
                                         stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)

    def start(self) -> str:
        """Start the head, then the workers; returns once every node is registered (or raises, after stopping)."""
        try:
            head = self.nodes["head"]
            self._launch(head)
            self._wait_head()
            for node in self.nodes.values():
                if not node.head:
                    self._launch(node)
            self.wait_nodes()
        except BaseException:
            self.stop()
            raise
        return self.address

    def _wait_head(self) -> None:
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            head = self.nodes["head"]
            if not head.alive:
                raise RuntimeError(f"the Ray head exited: {self.tail(head)}")
            with socket.socket() as s:
                s.settimeout(1)
                if s.connect_ex(("127.0.0.1", self.port)) == 0:
                    return
            time.sleep(0.3)
        raise TimeoutError(f"the Ray head did not open port {self.port} in {self.start_timeout:.0f} s")

    def alive_nodes(self) -> list[dict[str, Any]]:
        """The cluster's live nodes as Ray's GCS lists them (name, id, resources), asked by a short-lived driver."""
        r = subprocess.run([sys.executable, "-c", NODES_SCRIPT, self.address], env=self.base_env, capture_output=True, text=True, timeout=120)
        if r.returncode != 0:
            raise RuntimeError(f"cannot list the cluster's nodes: {r.stderr.strip().splitlines()[-1:]}")
        return json.loads(r.stdout.strip().splitlines()[-1])

    def wait_nodes(self, timeout: float | None = None) -> list[dict[str, Any]]:
        """Wait until every node of ours is alive under its name (a restarted node: under a new node id)."""
        deadline = time.monotonic() + (timeout or self.start_timeout)
        while True:
            for node in self.nodes.values():
                if node.proc is not None and not node.alive:
                    raise RuntimeError(f"Ray node {node.name} exited: {self.tail(node)}")
            try:
                nodes = self.alive_nodes()
            except (RuntimeError, subprocess.TimeoutExpired):
                nodes = []
            fresh = {n["name"]: n for n in nodes if n["id"] not in self.dead_ids}
            if all(name in fresh for name in self.nodes):
                for name, node in self.nodes.items():
                    node.node_id = fresh[name]["id"]
                return nodes
            if time.monotonic() > deadline:
                raise TimeoutError(f"Ray nodes {sorted(set(self.nodes) - set(fresh))} did not come up in time")
            time.sleep(1.0)

    def tail(self, node: Node, lines: int = 5) -> str:
        if node.log is None or not node.log.exists():
            return ""
        return " | ".join(node.log.read_text(errors="replace").strip().splitlines()[-lines:])

    # -- faults --------------------------------------------------------------------------------------
    def kill_node(self, name: str) -> int:
        """SIGKILL the raylet of node ``name`` (the node dies as with a crashed machine); returns the raylet's pid."""
        node = self.nodes[name]
        pid = node.raylet_pid()
        if pid is None:
            raise RuntimeError(f"node {name} has no raylet running")
        os.kill(pid, signal.SIGKILL)
        self.dead_ids.add(node.node_id)
        self._reap(node, grace=30.0)
        return pid

    def restart_node(self, name: str) -> None:
        node = self.nodes[name]
        self._reap(node, grace=10.0)
        self._launch(node)

    def stop_head(self) -> None:
        """Stop the head node (GCS and all): the cluster is gone until :meth:`start_new_head`."""
        head = self.nodes["head"]
        self._stop_node(head)
        # `ray start --head` refuses a port that its temp dir says it ran on while processes still name it
        (head.temp_dir / "ray_current_cluster").unlink(missing_ok=True)

    def start_new_head(self) -> None:
        """A new head on the same port, then the workers restarted to join it.

        A new head is a new cluster (Ray keeps GCS state only with an external
        Redis): worker nodes cannot rejoin it and are restarted, as a node
        supervisor (systemd, Kubernetes) would restart them.
        """
        workers = [n for n in self.nodes.values() if not n.head]
        for node in workers:
            self._stop_node(node)
        self._launch(self.nodes["head"])
        self._wait_head()
        for node in workers:
            self._launch(node)
        self.wait_nodes()

    def restart_head(self, down_s: float = 0.0) -> None:
        """:meth:`stop_head`, ``down_s`` seconds down, :meth:`start_new_head`."""
        self.stop_head()
        time.sleep(down_s)
        self.start_new_head()

    # -- stopping ------------------------------------------------------------------------------------
    def _reap(self, node: Node, grace: float) -> None:
        """Wait for the node's ``ray start`` to exit (it stops its processes when one dies), then clear its group."""
        if node.proc is None:
            return
        procs = descendants(node.proc.pid)
        try:
            node.proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            node.proc.terminate()
            try:
                node.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                node.proc.kill()
                node.proc.wait()
        self._kill_group(node)
        deadline = time.monotonic() + 30
        while any(alive(p) for p in procs) and time.monotonic() < deadline:  # a new head must not meet the old GCS
            time.sleep(0.1)

    def _kill_group(self, node: Node) -> None:
        if node.proc is None:
            return
        try:
            os.killpg(node.proc.pid, signal.SIGKILL)  # our own session: the node's leftovers, nobody else's
        except (ProcessLookupError, PermissionError):
            pass

    def _stop_node(self, node: Node) -> None:
        if node.proc is None:
            return
        self.dead_ids.add(node.node_id)
        if node.alive:
            node.proc.terminate()  # `ray start --block` stops the node's processes on SIGTERM
        self._reap(node, grace=60.0)

    def stop(self) -> None:
        """Stop every node (workers first), kill what is left of their process groups, remove the temp dirs."""
        for node in sorted(self.nodes.values(), key=lambda n: n.head):
            try:
                self._stop_node(node)
            except Exception:  # noqa: BLE001 - stop the other nodes whatever happened to this one
                self._kill_group(node)
        if self.owns_root:
            shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> LocalRayCluster:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--worker-cpus", type=float, default=1)
    ap.add_argument("--head-cpus", type=float, default=1)
    ap.add_argument("--object-store-mb", type=int, default=200)
    ap.add_argument("--seconds", type=float, default=600, help="stop the cluster after this long (Ctrl-C stops it sooner)")
    args = ap.parse_args(argv)
    cluster = LocalRayCluster(args.workers, worker_cpus=args.worker_cpus, head_cpus=args.head_cpus,
                              object_store_mb=args.object_store_mb)
    t = time.perf_counter()
    with cluster:
        nodes = cluster.alive_nodes()
        print(f"Ray cluster at {cluster.address} ({len(nodes)} nodes, {time.perf_counter() - t:.1f} s); "
              f"join with RAY_AUTH_MODE=disabled hiera ... --ray-address {cluster.address}", flush=True)
        for n in nodes:
            print(f"  {n['name']:6s} {n['id'][:12]}  CPU {n['resources'].get('CPU', 0):g}", flush=True)
        try:
            time.sleep(args.seconds)
        except KeyboardInterrupt:
            pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
