"""Every figure README.md and bench/README.md print is backed: a value of bench/expected.yaml, or allowlisted.

How to keep this passing when you write a figure into a README (the checker is ``bench/readme_figures.py``;
``python -m bench.readme_figures`` lists what is unbacked, ``--backed`` also what backs each figure):

* **A measured figure** (a score, a difference, a speed ratio): record it as a row of ``bench/expected.yaml`` with
  the command that reproduces it (``expected:`` and ``tolerance:``; a fraction, or ``unit: ratio`` for a speed
  figure, which is always a ratio of two timings of one run; ``device: nvidia-h100`` or the like for a figure
  measured on a lent GPU, which ``bench.check_expected`` then compares only with ``--device`` that name), or as a
  claim over rows (a claim's value backs its figure too). Then name the rows' id prefixes in an HTML comment inside
  the paragraph or table that prints it: ``<!-- figures: fetchhr/ivf/ reader/fetchhr-table2/ -->``. A figure is
  matched only against the rows its block names, at its printed precision (0.7781 backs ``77.8``, ``77.8%`` and
  ``0.778``; a ratio row 0.152 backs ``6.6×``).
* **A non-measurement** (a default, a threshold, a target, a size, a version, another paper's figure): add the
  short phrase that holds it to ``bench/readme_allowlist.yaml``, with a comment saying why. Reviewers read that
  list; a phrase that leaves its README fails this test, so entries cannot go stale.
* **Anything else** (a timing from one run, a figure no JSON records): leave it out of the README.

What counts as a figure: decimals, percentages, ``×`` ratios and numbers with a time or memory unit, outside code
(fenced blocks and `inline code`); plain integers (counts, sizes, dates) are not checked.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from types import ModuleType

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def rf() -> ModuleType:
    """``bench.readme_figures`` (bench is a package of the repository, on the tests' path: pyproject's pythonpath)."""
    return importlib.import_module("bench.readme_figures")


def test_every_readme_figure_is_recorded_or_allowlisted(rf):
    v = rf.check(REPO)
    print(f"{len(v.backed)} backed, {len(v.allowed)} allowlisted, {len(v.unbacked)} unbacked")
    assert not v.stale, f"allowlisted phrases no longer in their README: {v.stale}"
    assert not v.unbacked, "figures without a row of bench/expected.yaml or an allowlisted phrase:\n" + "\n".join(
        f"  {f.file}:{f.line}: {f.text}" for f in v.unbacked)


def test_the_allowlist_stays_short():
    allow = yaml.safe_load((REPO / "bench" / "readme_allowlist.yaml").read_text(encoding="utf-8"))
    assert sum(len(v or []) for v in allow.values()) <= 40


def _one(rf: ModuleType, text: str):
    (fig,) = rf.figures("x.md", text)
    return fig


@pytest.mark.parametrize(("text", "value", "unit", "decimals"), [
    ("reaches 77.8 top-1", 77.8, "", 1),
    ("the template of 94.4% and", 94.4, "%", 1),
    ("is 6.6× faster", 6.6, "×", 1),
    ("drops to 0.8 ms", 0.8, "ms", 1),
    ("took 336 s", 336_000.0, "ms", 0),
    ("peak RSS 1,581 MB here", 1581.0, "MB", 0),
    ("dense top-1 −0.4,", -0.4, "", 1),
])  # fmt: skip
def test_what_a_figure_is(rf, text: str, value: float, unit: str, decimals: int):
    fig = _one(rf, text)
    assert (fig.value, fig.unit, fig.decimals) == (pytest.approx(value), unit, decimals)


@pytest.mark.parametrize("text", [
    "Python 3.11.8 and torch 2.13.0",  # versions
    "on 2026-11-22, 5,696 questions, 2 cores",  # dates and counts
    "run `--set lam=1.59 --set doc_alpha=0.4`",  # inline code
    "```bash\nhiera eval --set lam=1.9\n```",  # a code block
    "SQuAD v1.1 and all-MiniLM-L6-v2",  # names
    "<!-- figures: scale_real/1000k/ -->",  # the scope comment
])  # fmt: skip
def test_what_is_not_a_figure(rf, text: str):
    assert rf.figures("x.md", text) == []


def test_a_range_gives_both_ends_the_unit(rf):
    assert [(f.value, f.unit) for f in rf.figures("x.md", "by 14–29% here")] == [(14.0, "%"), (29.0, "%")]


def test_matching_is_at_the_printed_precision_and_by_unit(rf):
    Value, backs = rf.Value, rf.backs
    frac, ratio, claim = Value("a", 0.7781, "fraction"), Value("b", 0.152, "ratio"), Value("c", -0.003, "claim")
    assert backs(frac, _one(rf, "77.8 top-1")) and backs(frac, _one(rf, "0.778")) and backs(frac, _one(rf, "77.8%"))
    assert not backs(frac, _one(rf, "77.9 top-1")) and not backs(frac, _one(rf, "77.82 top-1"))
    assert backs(ratio, _one(rf, "6.6× faster")) and not backs(ratio, _one(rf, "6.5× faster"))
    assert not backs(frac, _one(rf, "0.8 ms")) and not backs(ratio, _one(rf, "15.2 top-1"))  # a unit needs its kind of row
    assert backs(claim, _one(rf, "−0.3 top-1")) and backs(claim, _one(rf, "lost 0.3 points"))


def test_a_figure_is_backed_only_by_the_rows_its_block_names(rf, tmp_path: Path):
    spec = {"figures": [{"id": "bench_a/x/top1", "expected": 0.778}, {"id": "bench_b/y/top1", "expected": 0.512}]}
    (tmp_path / "expected.yaml").write_text(yaml.safe_dump(spec))
    (tmp_path / "allow.yaml").write_text(yaml.safe_dump({"R.md": [{"phrase": "a default of 0.35"}]}))
    (tmp_path / "R.md").write_text(
        "A reaches 77.8 top-1. <!-- figures: bench_a/ -->\n\nB reaches 51.2 top-1. <!-- figures: bench_a/ -->\n\n"
        "C reaches 77.8 with no scope.\n\nWith a default of 0.35 here.\n")
    v = rf.check(tmp_path, tmp_path / "expected.yaml", tmp_path / "allow.yaml", readmes=["R.md"])
    assert [(f.line, vid) for f, vid in v.backed] == [(1, "bench_a/x/top1")]
    assert [f.line for f in v.unbacked] == [3, 5]  # 51.2 is bench_b's, outside the named scope; C names none
    assert [f.text for f in v.allowed] == ["0.35"] and not v.stale
    (tmp_path / "allow.yaml").write_text(yaml.safe_dump({"R.md": [{"phrase": "a phrase that is gone"}]}))
    v = rf.check(tmp_path, tmp_path / "expected.yaml", tmp_path / "allow.yaml", readmes=["R.md"])
    assert v.stale == ["R.md: a phrase that is gone"]
