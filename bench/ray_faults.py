"""Faults of a multi-node Ray cluster: a worker node killed during a sharded build, a shard replica killed under load, the head restarted.

    python -m bench.ray_faults                                   # a few trials of each (about half an hour here)
    python -m bench.ray_faults --build-trials 10 --replica-trials 0 --head-trials 0 --docs 40 --seed 1  # SCALING.md's node kills
    python -m bench.ray_faults --build-trials 0 --replica-trials 10 --head-trials 1 --seed 0  # its replica kills, head restart
    python -m bench.reliability --ray-trials 10 ...              # the same trials as rows of the reliability report

Every trial runs on a :class:`bench.ray_cluster.LocalRayCluster` (a head and
two worker nodes started with ``ray start``, each with its own node id, CPUs,
object store and temp dir, on 127.0.0.1), with the real ``hiera`` commands in
subprocesses joining it with ``--ray-address``. The cluster is stopped at the
end whatever happened (its nodes are our own processes; ``ray stop``, which
would stop every Ray on the machine, is never called).

**Worker node killed during** ``hiera build --shards 3 --engine ray``: a
seeded synthetic collection, already built unsharded (the live build); each
trial starts with an empty embedding cache (the encoder's exported graph is
kept) so the build really encodes, and SIGKILLs the raylet of one worker node
(alternately w1, w2) at a random moment in the first 10-60 % of a clean
build's duration (later, a build run faster than the clean one may finish
first: the "killed mid-build" column counts the kills that landed). Judged: the build ends
(no hang) either complete (Ray retried the tasks) or with one ``hiera: error:``
line and the live build untouched (same build directory, same results), in
which case a rerun (the node restarted) must complete, reporting how many
vectors the embedding cache already held; then ``hiera check`` has no error
and every search (bm25, dense, dhr, hybrid; passage and document level) gives
the hits of an unsharded build of the same vectors (ids equal, scores within
1e-4; see :func:`unsharded_twin` for why "the same vectors").

**Shard replica killed under load**: ``hiera serve --engine ray`` of a
3-shard build of a real collection (WikiText-2's 60 Wikipedia articles,
2,906 passages), clients sending searches (four methods, some with
``partial=true``) while the replica of one shard (each trial the next) is
SIGKILLed. Every answer is judged against the unsharded build's answer to
the same request: a 200 without ``partial`` must equal it (no silently
partial result); a 200 with ``partial=true`` must say ``partial: false`` and
equal it, or ``partial: true`` naming the missing shard, with no hit from it;
the only other status allowed is the documented 503 (one line naming the
shard). Recovery time: from the kill to the first request after which every
answer was complete again.

**Head restarted** while ``hiera serve --engine ray`` runs (no build): the
head is stopped; once the server has exited (or after 90 s) a new head starts
on the same port (the workers are restarted, as a supervisor would: a new
head is a new cluster).
Judged: the server either keeps answering correctly or exits on its own with
one ``hiera: error:`` line; then ``hiera serve --engine ray`` started again on
the restarted cluster must answer correctly (time reported).
"""

from __future__ import annotations

import argparse
import os
import random
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from bench.common import OUT, data_dir, table, write_json
from bench.ray_cluster import LocalRayCluster, descendants, free_port

METHODS = ("bm25", "dense", "dhr", "hybrid")
TOL = 1e-4  # JSON round trip of float32 scores; sharded scores equal the unsharded ones to 1e-5 (tests/shard)
APP = "hiera"


def hiera(*args: str) -> list[str]:
    return [sys.executable, "-m", "hiera", *args]


def quiet_env(cluster: LocalRayCluster, cache: Path) -> dict[str, str]:
    env = cluster.env()
    env.update(HIERA_CACHE_DIR=str(cache), TOKENIZERS_PARALLELISM="false", PYTHONDONTWRITEBYTECODE="1")
    return env


# -- answers to compare ----------------------------------------------------------------------------------------
def reference_answers(root: Path, queries: list[str], levels: tuple[str, ...] = ("passage", "doc"),
                      k: int = 10) -> dict[str, list[tuple]]:
    """(method, level, query) -> [(doc_id, passage_id, score)], searched in this process."""
    from hiera.builds import open_collection
    from hiera.retrieve import get_retriever

    col = open_collection(root)
    out = {}
    for m in METHODS:
        r = get_retriever(m, col)
        for level in levels:
            for q in queries:
                out[key(m, level, q)] = [(h.doc_id, h.passage_id, h.score) for h in r.search(q, k=k, level=level).hits]
    col.store.close()
    return out


def key(method: str, level: str, q: str) -> str:
    return f"{method}|{level}|{q}"


def same_hits(a: list[tuple], b: list[tuple], tol: float = TOL) -> bool:
    return [x[:2] for x in a] == [x[:2] for x in b] and all(abs(x[2] - y[2]) <= tol for x, y in zip(a, b, strict=True))


def differences(a: dict[str, list[tuple]], b: dict[str, list[tuple]]) -> list[str]:
    return [k for k in a if not same_hits(a[k], b.get(k, []))]


# -- build trials ------------------------------------------------------------------------------------------------
@dataclass
class BuildTrial:
    trial: int
    victim: str
    kill_at_s: float
    killed: bool = False
    outcome: str = ""  # complete | clean failure | FAIL: ...
    build_s: float = 0.0
    error_line: str = ""
    live_untouched: bool | None = None
    cached_at_rerun: int | None = None
    texts: int = 0
    rerun_ok: bool | None = None
    check_errors: list[str] = field(default_factory=list)
    identical: bool = False
    nodes_used: dict[str, list[str]] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.outcome.startswith("FAIL") and not self.check_errors and self.identical


def placement_of(log: str) -> dict[str, list[str]]:
    """``placement: <task>: shard 000 on w1 (…), …`` lines → task -> node names."""
    out: dict[str, list[str]] = {}
    for line in log.splitlines():
        m = re.match(r"placement: ([\w-]+): (.*)", line.strip())
        if m:
            out[m.group(1)] = re.findall(r"on (\S+) \(", m.group(2))
    return out


def cached_vectors(cache: Path) -> int:
    n = 0
    for f in cache.glob("*.sqlite"):
        with sqlite3.connect(f) as c:
            n += int(c.execute("SELECT COUNT(*) FROM emb").fetchone()[0])
    return n


def wipe_vectors(cache: Path) -> None:
    """An empty embedding cache; the exported encoder graphs (``graphs/``) stay."""
    for f in cache.glob("*.sqlite*"):
        f.unlink()


def check_errors(root: Path) -> list[str]:
    from hiera.check import check_collection

    return [f.line() for f in check_collection(root) if f.status == "error"]


def unsharded_twin(root: Path, env: dict[str, str], cache: Path) -> Path | None:
    """Answers of an unsharded build of the same corpus over the same embedding cache (same vectors), or None.

    The reference for "identical to one index": the default encoder backend
    (onnx-int8) quantizes activations per batch, so a vector depends on the
    texts it was encoded with (cosine 0.97 between one text alone and in a
    batch of four); a sharded Ray build, encoded in Ray Data's batches, or a
    resumed one, holds other vectors than a fresh unsharded build. Built from
    the cache the sharded build filled, the twin indexes the very same vectors
    (it must encode nothing), so any difference is the sharding's.
    """
    twin = root.with_name(root.name + "-one")
    shutil.rmtree(twin, ignore_errors=True)
    shutil.copytree(root, twin, symlinks=True)
    before = cached_vectors(cache)
    r = subprocess.run(hiera("build", str(twin), "-q"), env=env, capture_output=True, text=True)
    if r.returncode != 0 or cached_vectors(cache) != before:
        return None
    return twin


def run_build(root: Path, cluster: LocalRayCluster, env: dict[str, str], log: Path,
              kill: tuple[str, float] | None = None, timeout: float = 1800) -> tuple[int | None, float, bool]:
    """``hiera build --shards 3 --engine ray`` joining the cluster; SIGKILL a worker's raylet ``kill[1]`` s in."""
    argv = hiera("build", str(root), "--shards", "3", "--engine", "ray", "--ray-address", cluster.address)
    t0 = time.perf_counter()
    with log.open("w") as out:
        proc = subprocess.Popen(argv, env=env, stdout=out, stderr=subprocess.STDOUT)
        killed = False
        try:
            if kill is not None:
                while proc.poll() is None and time.perf_counter() - t0 < kill[1]:
                    time.sleep(0.05)
                if proc.poll() is None:
                    cluster.kill_node(kill[0])
                    killed = True
            rc = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            rc = None  # hung
    return rc, time.perf_counter() - t0, killed


def build_trials(cluster: LocalRayCluster, work: Path, n: int, docs: int, seed: int) -> dict[str, Any]:
    from bench.reliability import queries, synthetic_docs, write_docs

    cache = work / "cache"
    env = quiet_env(cluster, cache)
    src = write_docs(work / "build-docs.jsonl", synthetic_docs(docs, seed, prefix="v"))
    template = work / f"build-template-{docs}"
    qs = queries(synthetic_docs(docs, seed, prefix="v"), 6)
    if not template.exists():
        subprocess.run(hiera("ingest", str(src), "--format", "hiera-jsonl", "--index", str(template), "-q"), env=env, check=True)
        subprocess.run(hiera("build", str(template), "-q"), env=env, check=True)
    template_answers = reference_answers(template, qs)  # the live build before every trial
    texts = 0

    def identical(root: Path) -> bool:
        twin = unsharded_twin(root, env, cache)
        if twin is None:
            return False
        same = not differences(reference_answers(twin, qs), reference_answers(root, qs))
        shutil.rmtree(twin, ignore_errors=True)
        return same

    def fresh(tag: str) -> Path:
        root = work / "build-trials" / tag
        shutil.rmtree(root, ignore_errors=True)
        root.parent.mkdir(parents=True, exist_ok=True)
        shutil.copytree(template, root, symlinks=True)
        return root

    # a clean run: its duration places the kills, its log shows the placement of a complete build
    root = fresh("clean")
    wipe_vectors(cache)
    rc, clean_s, _ = run_build(root, cluster, env, work / "build-clean.log")
    clean_log = (work / "build-clean.log").read_text(errors="replace")
    if rc != 0:
        raise SystemExit(f"the clean sharded build failed ({rc}): {clean_log[-2000:]}")
    texts = cached_vectors(cache)
    clean_placement = placement_of(clean_log)
    if not identical(root):
        raise SystemExit("the clean Ray build differs from an unsharded build of the same vectors")
    print(f"ray build: clean run {clean_s:.0f}s, {texts} texts encoded, placement {clean_placement}", flush=True)

    rng = random.Random(seed)
    trials = []
    for i in range(n):
        victim = ("w1", "w2")[i % 2]
        t = BuildTrial(i, victim, round(rng.uniform(0.1, 0.6) * clean_s, 1))
        root = fresh(str(i))
        live_before = (root / "index").resolve()
        wipe_vectors(cache)
        log = work / f"build-{i}.log"
        rc, t.build_s, t.killed = run_build(root, cluster, env, log, kill=(victim, t.kill_at_s),
                                            timeout=max(900.0, 6 * clean_s))
        text = log.read_text(errors="replace")
        lines = [x for x in text.strip().splitlines() if x.startswith("hiera: error:")]
        cluster.restart_node(victim)
        cluster.wait_nodes()
        if rc is None:
            t.outcome = "FAIL: hung (killed after the time limit)"
        elif rc == 0:
            t.outcome = "complete"
            t.nodes_used = placement_of(text)
        else:
            t.error_line = (lines or text.strip().splitlines() or [""])[-1]
            one_line = rc == 2 and len(lines) == 1 and "Traceback" not in text
            t.live_untouched = (root / "index").resolve() == live_before and not differences(
                template_answers, reference_answers(root, qs))
            t.cached_at_rerun = cached_vectors(cache)
            rc2, _, _ = run_build(root, cluster, env, work / f"build-{i}-rerun.log")
            t.rerun_ok = rc2 == 0
            t.nodes_used = placement_of((work / f"build-{i}-rerun.log").read_text(errors="replace"))
            if not one_line:
                t.outcome = f"FAIL: not a one-line error (exit {rc}): {text.strip()[-300:]!r}"
            elif not t.live_untouched:
                t.outcome = "FAIL: the live build changed"
            elif not t.rerun_ok:
                t.outcome = "FAIL: the rerun failed"
            else:
                t.outcome = "clean failure, rerun complete"
        t.check_errors = check_errors(root)
        t.identical = rc is not None and (rc == 0 or bool(t.rerun_ok)) and identical(root)
        t.texts = texts
        trials.append(t)
        print(f"ray build #{i}: kill {victim} at {t.kill_at_s}s (killed={t.killed}) -> {t.outcome}; "
              f"check errors {len(t.check_errors)}, identical {t.identical}, cached at rerun {t.cached_at_rerun}",
              flush=True)
        if t.ok:
            shutil.rmtree(root, ignore_errors=True)
    ok = sum(t.ok for t in trials)
    return {
        "fault": "worker node (raylet) SIGKILLed during `hiera build --shards 3 --engine ray`",
        "trials": len(trials), "killed": sum(t.killed for t in trials),
        "complete": sum(t.outcome == "complete" for t in trials),
        "clean_failure_then_rerun": sum(t.outcome.startswith("clean failure") for t in trials),
        "check_errors": sum(bool(t.check_errors) for t in trials),
        "identical": sum(t.identical for t in trials),
        "outcome": "pass" if ok == len(trials) else f"FAIL ({len(trials) - ok})",
        "pass_fraction": ok / len(trials) if trials else 0.0,  # the target: 1.0 (checked by bench/expected.yaml)
        "clean_run_s": round(clean_s, 1), "texts": texts, "documents": docs,
        "clean_placement": clean_placement,
        "error_example": next((t.error_line for t in trials if t.error_line), ""),
        "details": [asdict(t) for t in trials],
    }


# -- serving ---------------------------------------------------------------------------------------------------
def wait_warm(url: str, proc: subprocess.Popen, timeout: float = 900) -> float:
    import httpx

    t0 = time.perf_counter()
    while time.perf_counter() - t0 < timeout:
        if proc.poll() is not None:
            raise RuntimeError(f"hiera serve exited with {proc.returncode}")
        try:
            r = httpx.get(url + "health", timeout=5)
            if r.status_code == 200 and r.json().get("warm"):
                return time.perf_counter() - t0
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    raise TimeoutError(f"{url} was not warm after {timeout:.0f} s")


class Server:
    """``hiera serve --engine ray`` joining the cluster, in a subprocess; stderr kept in a file."""

    def __init__(self, root: Path, cluster: LocalRayCluster, env: dict[str, str], log: Path, replicas: int = 1,
                 shard_cpus: float = 1.0) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/"
        self.log = log
        argv = hiera("serve", str(root), "--engine", "ray", "--ray-address", cluster.address, "--port", str(self.port),
                     "--replicas", str(replicas), "--shard-cpus", f"{shard_cpus:g}")
        with log.open("a") as out:
            self.proc = subprocess.Popen(argv, env=env, stdout=out, stderr=subprocess.STDOUT)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def placement(self, wait: float = 120.0) -> list[str]:
        """The server's ``placement:`` lines (printed once the application is up, just before ``serving``)."""
        deadline = time.monotonic() + wait
        while True:
            text = self.log.read_text(errors="replace")
            if "hiera: serving " in text or time.monotonic() > deadline or self.proc.poll() is not None:
                return [x.split("placement: ", 1)[1] for x in text.splitlines() if "hiera: placement: " in x]
            time.sleep(0.5)


def replica_pid(cluster: LocalRayCluster, deployment: str) -> tuple[str, int] | None:
    """(node name, pid) of a live replica of ``deployment``: a process of one of our nodes whose title names it."""
    title = f"ServeReplica:{APP}:{deployment}"
    for node in cluster.nodes.values():
        if node.proc is None:
            continue
        for pid in descendants(node.proc.pid):
            try:
                cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if cmd.startswith("ray::") and title in cmd:
                return node.name, pid
    return None


@dataclass
class Answer:
    sent: float
    done: float
    status: int | str
    verdict: str  # complete | partial-marked | 503 | WRONG: ... | OTHER: ...


def judge(r: Any, want: list[tuple], partial: bool, owner: dict[str, str]) -> str:
    if r.status_code == 503:
        detail = r.json().get("detail", "")
        return "503" if "did not answer" in detail and "\n" not in detail else f"OTHER: 503 without the message {detail[:120]!r}"
    if r.status_code != 200:
        return f"OTHER: HTTP {r.status_code}: {r.text[:160]}"
    body = r.json()
    got = [(h["doc_id"], h["passage_id"], h["score"]) for h in body["hits"]]
    if partial and body.get("partial"):
        missing = set(body.get("missing_shards") or [])
        steps = [s for s in body.get("trace", []) if s.get("name") == "partial"]
        if not missing or not steps:
            return "WRONG: partial without the missing shards named"
        if any(owner.get(d) in missing for d, _, _ in got):
            return "WRONG: a hit from a shard said to be missing"
        return "partial-marked"
    if partial and body.get("partial") is not False:
        return "WRONG: partial=true answered without the partial field"
    return "complete" if same_hits(want, got) else "WRONG: a result that differs from the unsharded build's"


def doc_shards(root: Path) -> dict[str, str]:
    from hiera.builds import open_collection

    col = open_collection(root)
    by_row = {d.rowid: d.id for d in col.store.iter_docs()}
    rows = col.view.doc_rows
    return {by_row[int(rows[i])]: e["name"] for e in col.manifest.shards for i in range(*e["docs"])}


def load_clients(url: str, refs: dict[str, list[tuple]], qs: list[str], owner: dict[str, str], clients: int,
                 stop: threading.Event, log: list[Answer], seed: int, partial_share: float = 0.3) -> list[threading.Thread]:
    import httpx

    def run(i: int) -> None:
        rng = random.Random(seed * 100 + i)
        with httpx.Client(base_url=url, timeout=120) as c:
            while not stop.is_set():
                q, m = rng.choice(qs), rng.choice(METHODS)
                partial = rng.random() < partial_share
                params = {"q": q, "retriever": m, "k": 10, **({"partial": "true"} if partial else {})}
                t = time.monotonic()
                try:
                    r = c.get("search", params=params)
                    verdict, status = judge(r, refs[key(m, "passage", q)], partial, owner), r.status_code
                except httpx.HTTPError as e:
                    verdict, status = f"OTHER: {type(e).__name__}", "error"
                log.append(Answer(t, time.monotonic(), status, verdict))

    threads = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(clients)]
    for th in threads:
        th.start()
    return threads


def recovery(answers: list[Answer], kill: float) -> dict[str, Any]:
    after = sorted((a for a in answers if a.done >= kill), key=lambda a: a.sent)
    bad = [i for i, a in enumerate(after) if a.verdict != "complete"]
    if not bad:
        back = 0.0
    else:
        nxt = next((a for a in after[bad[-1] + 1:] if a.verdict == "complete"), None)
        back = (nxt.sent - kill) if nxt is not None else float("nan")
    waited = [a for a in answers if a.sent < kill < a.done and a.verdict == "complete"]
    return {"recovery_s": round(back, 1), "waited_and_succeeded": len(waited),
            "longest_wait_s": round(max((a.done - a.sent for a in waited), default=0.0), 1)}


def serving_setup(cluster: LocalRayCluster, work: Path, nq: int,
                  cache: Path | None = None) -> tuple[Path, dict[str, list[tuple]], list[str], dict[str, str]]:
    """WikiText-2 (60 real articles with sections) unsharded (the reference) and as 3 shards; the questions.

    Built through ``cache`` (default: the run's), where the vectors may already be.
    """
    from bench.load import load_question_texts

    env = quiet_env(cluster, cache or work / "cache")
    one, sharded = work / "wt2-one", work / "wt2-s3"
    src = data_dir() / "wikitext2" / "wiki.test.raw"
    for root, extra in ((one, ()), (sharded, ("--shards", "3"))):
        if not (root / "index").exists():
            shutil.rmtree(root, ignore_errors=True)
            subprocess.run(hiera("ingest", str(src), "--format", "wikitext", "--index", str(root), "-q"), env=env, check=True)
            subprocess.run(hiera("build", str(root), "-q", *extra), env=env, check=True)
    qs = load_question_texts(data_dir() / "squad" / "dev-v1.1.first24.json", "squad", nq)
    refs = reference_answers(one, qs, levels=("passage",))
    return sharded, refs, qs, doc_shards(sharded)


def replica_trials(cluster: LocalRayCluster, work: Path, n: int, clients: int, seed: int, replicas: int = 1,
                   shard_cpus: float = 1.0, window: float = 45.0, cache: Path | None = None) -> dict[str, Any]:
    root, refs, qs, owner = serving_setup(cluster, work, 24, cache)
    env = quiet_env(cluster, cache or work / "cache")
    server = Server(root, cluster, env, work / f"serve-r{replicas}.log", replicas=replicas, shard_cpus=shard_cpus)
    trials = []
    try:
        up = wait_warm(server.url, server.proc)
        placement = server.placement()
        print(f"ray serve ({replicas} replica(s) per shard) warm in {up:.0f}s; " + "; ".join(placement), flush=True)
        shards = sorted(set(owner.values()))
        for i in range(n):
            victim = f"shard-{shards[i % len(shards)]}"
            found = None
            for _ in range(120):  # the previous trial's replacement may still be starting
                found = replica_pid(cluster, victim)
                if found:
                    break
                time.sleep(1)
            if found is None:
                raise RuntimeError(f"no replica of {victim} is running")
            answers: list[Answer] = []
            stop = threading.Event()
            threads = load_clients(server.url, refs, qs, owner, clients, stop, answers, seed + i)
            time.sleep(3.0)
            kill = time.monotonic()
            os.kill(found[1], signal.SIGKILL)
            while time.monotonic() - kill < window:  # the window, at least; longer while answers are still failing
                time.sleep(1.0)
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline:
                recent = [a for a in answers if a.done > time.monotonic() - 5]
                if recent and all(a.verdict == "complete" for a in recent):
                    break
                time.sleep(1.0)
            stop.set()
            for th in threads:
                th.join(timeout=150)
            verdicts = [a.verdict for a in answers]
            row = {
                "trial": i, "victim": f"{victim} on {found[0]} (pid {found[1]})", "requests": len(answers),
                "complete": verdicts.count("complete"), "partial_marked": verdicts.count("partial-marked"),
                "503": verdicts.count("503"), "wrong": sum(v.startswith("WRONG") for v in verdicts),
                "other": sum(v.startswith("OTHER") for v in verdicts), **recovery(answers, kill),
                "examples": sorted({v for v in verdicts if v.startswith(("WRONG", "OTHER"))})[:5],
            }
            trials.append(row)
            print(f"ray serve #{i}: kill {row['victim']}: {row['requests']} requests, {row['complete']} complete, "
                  f"{row['partial_marked']} partial (marked), {row['503']} x 503, {row['wrong']} wrong, "
                  f"{row['other']} other; recovered in {row['recovery_s']}s", flush=True)
    finally:
        server.stop()
    bad = [t for t in trials if t["wrong"] or t["other"]]
    rec = [t["recovery_s"] for t in trials]
    return {
        "fault": f"shard replica SIGKILLed under load (`hiera serve --engine ray`, {replicas} replica(s) per shard, "
                 f"{clients} clients)",
        "trials": len(trials), "requests": sum(t["requests"] for t in trials),
        "complete": sum(t["complete"] for t in trials), "partial_marked": sum(t["partial_marked"] for t in trials),
        "503": sum(t["503"] for t in trials), "wrong": sum(t["wrong"] for t in trials),
        "other": sum(t["other"] for t in trials),
        "recovery_s": {"min": min(rec, default=0), "median": sorted(rec)[len(rec) // 2] if rec else 0,
                       "max": max(rec, default=0)},
        "outcome": "pass" if not bad and trials else f"FAIL ({len(bad)})",
        # the targets, as fractions of all requests (checked by bench/expected.yaml): both 0
        "wrong_fraction": sum(t["wrong"] for t in trials) / max(1, sum(t["requests"] for t in trials)),
        "other_fraction": sum(t["other"] for t in trials) / max(1, sum(t["requests"] for t in trials)),
        "placement": placement if trials else [], "details": trials,
    }


def head_trials(cluster: LocalRayCluster, work: Path, n: int, max_down: float = 90.0,
                cache: Path | None = None) -> dict[str, Any]:
    import httpx

    root, refs, qs, owner = serving_setup(cluster, work, 8, cache)
    env = quiet_env(cluster, cache or work / "cache")
    trials = []
    server = Server(root, cluster, env, work / "serve-head-0.log")
    try:
        wait_warm(server.url, server.proc)
        for i in range(n):
            t0 = time.monotonic()
            cluster.stop_head()
            exited_after = None
            answered = False
            deadline = time.monotonic() + max_down
            while time.monotonic() < deadline:  # the head is down: does the server notice?
                if server.proc.poll() is not None:
                    exited_after = time.monotonic() - t0
                    break
                time.sleep(0.5)
            cluster.start_new_head()
            restarted = time.monotonic() - t0
            deadline = time.monotonic() + 60
            while exited_after is None and time.monotonic() < deadline:  # or does it come back by itself?
                if server.proc.poll() is not None:
                    exited_after = time.monotonic() - t0
                    break
                try:
                    r = httpx.get(server.url + "search", params={"q": qs[0], "retriever": "bm25", "k": 10}, timeout=5)
                    answered = answered or judge(r, refs[key("bm25", "passage", qs[0])], False, owner) == "complete"
                except httpx.HTTPError:
                    pass
                time.sleep(1.0)
            text = server.log.read_text(errors="replace").strip().splitlines()
            errors = [x for x in text if x.startswith("hiera: error:")]
            rc = server.proc.returncode
            if server.proc.poll() is None:
                server.stop()
            # a new server on the restarted cluster
            t1 = time.monotonic()
            server = Server(root, cluster, env, work / f"serve-head-{i + 1}.log")
            try:
                wait_warm(server.url, server.proc, timeout=600)
                r = httpx.get(server.url + "search", params={"q": qs[0], "retriever": "dhr", "k": 10}, timeout=60)
                back = judge(r, refs[key("dhr", "passage", qs[0])], False, owner) == "complete"
            except (RuntimeError, TimeoutError, httpx.HTTPError):
                back = False
            serving_again = time.monotonic() - t1
            clean_exit = rc == 2 and len(errors) == 1 and "lost the Ray cluster" in errors[0]
            row = {"trial": i, "new_head_after_s": round(restarted, 1), "server_exit_code": rc,
                   "exited_after_s": None if exited_after is None else round(exited_after, 1),
                   "message": errors[-1] if errors else "", "kept_answering": answered and rc is None,
                   "restarted_server_answers": back, "serving_again_s": round(serving_again, 1),
                   "ok": (clean_exit or (rc is None and answered)) and back}
            trials.append(row)
            print(f"ray head #{i}: server exit {rc} after {row['exited_after_s']}s ({row['message'][:100]!r}); "
                  f"restarted server answers: {back} in {row['serving_again_s']}s", flush=True)
    finally:
        server.stop()
    ok = sum(t["ok"] for t in trials)
    return {
        "fault": "head restarted while `hiera serve --engine ray` runs (workers restarted with it)",
        "trials": len(trials), "clean_exit": sum(t["server_exit_code"] == 2 for t in trials),
        "kept_answering": sum(t["kept_answering"] for t in trials),
        "restarted_server_answers": sum(t["restarted_server_answers"] for t in trials),
        "outcome": "pass" if ok == len(trials) and trials else f"FAIL ({len(trials) - ok})",
        "message": next((t["message"] for t in trials if t["message"]), ""), "details": trials,
    }


def median(xs: list[float]) -> float:
    xs = sorted(x for x in xs if x is not None)
    return xs[len(xs) // 2] if xs else float("nan")


def render(rows: list[dict[str, Any]]) -> str:
    """One markdown table per fault (docs/SCALING.md and docs/RELIABILITY.md quote them)."""
    out = []
    for r in rows:
        if "clean_failure_then_rerun" in r:
            out.append(table([{"fault": r["fault"], "trials": r["trials"], "killed mid-build": r["killed"],
                               "build complete": r["complete"], "clean failure, rerun complete":
                               r["clean_failure_then_rerun"], "check errors": r["check_errors"],
                               "identical to unsharded": r["identical"], "outcome": r["outcome"]}]))
        elif "recovery_s" in r:
            out.append(table([{"fault": r["fault"], "trials": r["trials"], "requests": r["requests"],
                               "complete": r["complete"], "partial, marked": r["partial_marked"], "503": r["503"],
                               "wrong (unmarked partial)": r["wrong"], "other errors / 5xx": r["other"],
                               "recovery s (min / median / max)": "{min} / {median} / {max}".format(**r["recovery_s"]),
                               "outcome": r["outcome"]}]))
        else:
            d = r["details"]
            out.append(table([{"fault": r["fault"], "trials": r["trials"], "server exited in one line": r["clean_exit"],
                               "exit after head stop, s (median)": median([t["exited_after_s"] for t in d]),
                               "restarted server answers": r["restarted_server_answers"],
                               "serving again, s (median)": median([t["serving_again_s"] for t in d]),
                               "outcome": r["outcome"]}]))
    return "\n\n".join(out)


def run_all(args: argparse.Namespace) -> list[dict[str, Any]]:
    work = args.work or Path(tempfile.mkdtemp(prefix="hiera-rayfaults-"))
    work.mkdir(parents=True, exist_ok=True)
    (work / "cache").mkdir(exist_ok=True)
    from hiera.encode import default_cache_dir

    # the serving collection's vectors may be there already (this cache is never wiped)
    shared = getattr(args, "serve_cache", None) or default_cache_dir()
    os.environ["HIERA_CACHE_DIR"] = str(work / "cache")  # this process's reference searches too
    cluster = LocalRayCluster(2, worker_cpus=args.worker_cpus, head_cpus=1, object_store_mb=args.object_store_mb,
                              env={"HIERA_CACHE_DIR": str(work / "cache")})
    rows: list[dict[str, Any]] = []
    t = time.perf_counter()
    with cluster:
        nodes = cluster.alive_nodes()
        print(f"cluster {cluster.address}: " + ", ".join(f"{x['name']} {x['id'][:12]}" for x in nodes), flush=True)
        if args.build_trials:
            rows.append(build_trials(cluster, work, args.build_trials, args.docs, args.seed))
        if args.replica_trials:
            rows.append(replica_trials(cluster, work, args.replica_trials, args.clients, args.seed, cache=shared))
            if args.replicas2_trials:
                rows.append(replica_trials(cluster, work, args.replicas2_trials, args.clients, args.seed, replicas=2,
                                           shard_cpus=0.5, cache=shared))
        if args.head_trials:
            rows.append(head_trials(cluster, work, args.head_trials, cache=shared))
    for r in rows:
        r["cluster"] = {"nodes": [{"name": x["name"], "id": x["id"], "CPU": x["resources"].get("CPU")} for x in nodes],
                        "object_store_mb": args.object_store_mb}
        r["seconds"] = round(time.perf_counter() - t)
    if args.work is None:
        shutil.rmtree(work, ignore_errors=True)
    return rows


def add_arguments(ap: argparse.ArgumentParser, prefix: str = "") -> None:
    ap.add_argument(f"--{prefix}build-trials", dest="build_trials", type=int, default=2)
    ap.add_argument(f"--{prefix}replica-trials", dest="replica_trials", type=int, default=2)
    ap.add_argument(f"--{prefix}replicas2-trials", dest="replicas2_trials", type=int, default=0,
                    help="replica kills with 2 replicas per shard on different nodes")
    ap.add_argument(f"--{prefix}head-trials", dest="head_trials", type=int, default=1)
    ap.add_argument(f"--{prefix}docs", dest="docs", type=int, default=80, help="documents of the build trials' collection")
    ap.add_argument(f"--{prefix}clients", dest="clients", type=int, default=4, help="clients during the replica kills")
    ap.add_argument(f"--{prefix}worker-cpus", dest="worker_cpus", type=float, default=2,
                    help="logical CPUs of each worker node (Ray's accounting; the machine's cores are shared)")
    ap.add_argument(f"--{prefix}object-store-mb", dest="object_store_mb", type=int, default=200)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(ap)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--work", type=Path, default=None)
    ap.add_argument("--out", type=Path, default=OUT / "ray_faults.json")
    args = ap.parse_args(argv)
    rows = run_all(args)
    print(render(rows))
    path = write_json(args.out, {"rows": rows, "ok": all(r["outcome"] == "pass" for r in rows)})
    print(f"wrote {path}")
    return 0 if all(r["outcome"] == "pass" for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
