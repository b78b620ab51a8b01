"""The process environment hiera sets up before model libraries load."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from hiera.cli import main
from hiera.models import passive_threads


def test_the_cli_lets_idle_openmp_threads_sleep(monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    assert main(["methods"]) == 0
    assert os.environ["OMP_WAIT_POLICY"] == "PASSIVE"


def test_an_explicit_wait_policy_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OMP_WAIT_POLICY", "ACTIVE")
    assert passive_threads() == {"OMP_WAIT_POLICY": "ACTIVE"}


def test_the_policy_is_set_before_torch_loads() -> None:
    """OpenMP runtimes read the variable once, at load: the entry point must set it with torch not yet imported."""
    code = (
        "import os, sys\n"
        "os.environ.pop('OMP_WAIT_POLICY', None)\n"
        "import hiera.models as m\n"
        "orig = m.passive_threads\n"
        "def spy():\n"
        "    assert 'torch' not in sys.modules and 'faiss' not in sys.modules\n"
        "    return orig()\n"
        "m.passive_threads = spy\n"
        "from hiera.cli import main\n"
        "main(['methods'])\n"
        "assert os.environ['OMP_WAIT_POLICY'] == 'PASSIVE'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, timeout=120)


@pytest.mark.parametrize(("given", "expected"), [(None, "PASSIVE"), ("ACTIVE", "ACTIVE")])
def test_importing_hiera_lets_idle_threads_sleep_unless_told_otherwise(given: str | None, expected: str) -> None:
    """The Python API and the adapters never pass through the CLI: the package import sets it, before FAISS."""
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    if given is not None:
        env["OMP_WAIT_POLICY"] = given
    code = ("import os, sys\nimport hiera\nassert 'faiss' not in sys.modules and 'torch' not in sys.modules\n"
            "print(os.environ['OMP_WAIT_POLICY'])")
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True, env=env, timeout=60)
    assert out.stdout.strip() == expected


# -- Hub access: hiera's loads read local files; the host application's settings are its own ----------------
HUB_VARS = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE", "WANDB_DISABLED")

LOADS = """
import json, os, socket, sys
attempts = []
real_connect, real_connect_ex = socket.socket.connect, socket.socket.connect_ex

def guard(real):
    def connect(self, address):
        if self.family in (socket.AF_INET, socket.AF_INET6):
            attempts.append(repr(address))
            raise OSError("this test forbids network use")
        return real(self, address)
    return connect

socket.socket.connect, socket.socket.connect_ex = guard(real_connect), guard(real_connect_ex)
before = dict(os.environ)
from hiera.integrations.langchain import HieraRetriever
from hiera.integrations.llamaindex import HieraRetriever as IndexRetriever
after_import = dict(os.environ)
collection, reranker = sys.argv[1], sys.argv[2]
assert HieraRetriever(source=collection, method="dense", k=2).invoke("Which piece moves in an L shape?")
assert IndexRetriever(source=collection, method="dense", k=2).retrieve("jazz")
from hiera.crossencoder import Reranker
from hiera.encode import DEFAULT_MODEL, resolve_model_path
from hiera.read.model import new_reader_model
assert Reranker(reranker, device="cpu").score("q", ["a text"]).shape == (1,)
new_reader_model(resolve_model_path(DEFAULT_MODEL))
import huggingface_hub.constants as hub
changed = sorted(k for k in set(before) | set(os.environ) if before.get(k) != os.environ.get(k))
loads = list(attempts)
from hiera.cli import main  # a one-step bi-encoder training: its model card looks nothing up on the Hub
assert main(["train", *sys.argv[3:], "--format", "nq-open", "--negatives", "in-batch", "--max-steps", "1",
             "--batch-size", "4", "-q"]) == 0
print(json.dumps({"import_changed": after_import != before, "changed": changed, "attempts": loads,
                  "hub_offline": hub.HF_HUB_OFFLINE, "training_attempts": attempts[len(loads):]}))
"""


def test_hieras_loads_never_touch_the_network_nor_the_hosts_hub_settings(shared_root, reranker_dir, tmp_path) -> None:
    """A LangChain / LlamaIndex program keeps its Hub access; hiera's encoder, cross-encoder and reader loads stay local.

    In a fresh process with the Hub switched on (pointed at a closed port) and
    every TCP connection refused and recorded: importing both adapters,
    searching through them (the encoder loads), loading a cross-encoder and a
    reader's base model leave ``os.environ`` as it was and connect nowhere; nor
    does a training run (``hiera train``, one step).
    """
    import helpers

    questions = tmp_path / "q.jsonl"
    questions.write_text("".join(json.dumps({"question": q.text, "answer": q.answers}) + "\n"
                                 for q in helpers.tiny_questions()))
    train = [str(helpers.copy_collection(shared_root, tmp_path / "col")), "--questions", str(questions),
             "--out", str(tmp_path / "model")]
    env = {k: v for k, v in os.environ.items() if k not in HUB_VARS}
    env["HF_ENDPOINT"] = "http://127.0.0.1:9"
    done = subprocess.run([sys.executable, "-c", LOADS, str(shared_root), str(reranker_dir), *train], env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen == {"import_changed": False, "changed": [], "attempts": [], "hub_offline": False,
                    "training_attempts": []}
