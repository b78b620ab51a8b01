"""spaCy's loader: the small English pipeline loads without importing torch, and only its own thread is refused."""

from __future__ import annotations

import json
import subprocess
import sys

from hiera.link.spacyload import SPACY_MODEL, _NoTorchInThisThread, _without_torch


def _run(code: str) -> dict:
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_small_pipeline_parses_without_importing_torch_and_torch_still_imports_afterwards() -> None:
    out = _run(
        "import json, sys\n"
        "from hiera.link.nlp import SpacyModel\n"
        "doc = SpacyModel()('Barack Obama visited Paris in 2009.')\n"
        "ents = [e.text for e in doc.ents]\n"
        "torch_loaded = 'torch' in sys.modules\n"
        "finders = [type(f).__name__ for f in sys.meta_path]\n"
        "import torch\n"
        "print(json.dumps({'ents': ents, 'torch_loaded': torch_loaded, 'finders': finders, 'torch': torch.__version__}))\n"
    )
    assert "Barack Obama" in out["ents"] and "Paris" in out["ents"]
    assert out["torch_loaded"] is False
    assert "_NoTorchInThisThread" not in out["finders"]  # removed once the model is loaded
    assert out["torch"]


def test_only_the_loading_thread_is_refused_torch() -> None:
    out = _run(
        "import json, threading\n"
        "from hiera.link.spacyload import _without_torch\n"
        "seen = {}\n"
        "def other():\n"
        "    import torch\n"
        "    seen['other'] = torch.__version__\n"
        "with _without_torch('" + SPACY_MODEL + "'):\n"
        "    try:\n"
        "        import torch.nn\n"
        "        seen['own'] = 'imported'\n"
        "    except ModuleNotFoundError:\n"
        "        seen['own'] = 'refused'\n"
        "    t = threading.Thread(target=other); t.start(); t.join()\n"
        "print(json.dumps(seen))\n"
    )
    assert out["own"] == "refused"
    assert out["other"]  # another thread imported torch while the refusal was in place


def test_other_pipelines_or_a_process_with_torch_are_left_alone() -> None:
    import sys as _sys

    before = list(_sys.meta_path)
    with _without_torch("en_core_web_trf"):  # may need torch: no refusal
        assert not any(isinstance(f, _NoTorchInThisThread) for f in _sys.meta_path)
    assert _sys.meta_path == before
