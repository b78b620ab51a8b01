"""Training arguments as dataclasses (sentence-transformers style), one per trainer."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from hiera.encode import DEFAULT_MODEL
from hiera.errors import BadInputError


def _check_warmup(ratio: float) -> None:
    # the trainers pass it as transformers' warmup_steps, which counts steps from 1 up
    if not 0.0 <= ratio < 1.0:
        raise BadInputError(f"warmup_ratio must be in [0, 1), got {ratio}")


@dataclass
class TrainArgs:
    """How ``hiera train`` trains a dual encoder for one level.

    Defaults are sized for a 2-core CPU: one hard negative per question beside
    the in-batch ones, one epoch, and an optional wall-clock cap.
    """

    level: str = "passage"
    negatives: tuple[str, ...] = ("in-batch", "bm25")
    hard_negatives: int = 1  # hard negatives per example, drawn from the kinds in turn
    per_kind: int = 4  # negatives of each kind kept per question (the pool ``hard_negatives`` draws from)
    iterations: int = 1  # 2: mine negatives with the iteration-1 model and train again
    iter2_init: str = "base"  # iteration 2 starts from the base model (the paper) or continues from "iter1"
    # iteration 2 trains on the iteration-1 questions (the paper) or on a "fresh" seeded sample disjoint from
    # them (falls back to the rest when fewer remain): with a capped --max-examples it sees new questions
    iter2_questions: str = "same"
    base_model: str = DEFAULT_MODEL
    batch_size: int = 32
    epochs: float = 1.0
    max_steps: int | None = None
    max_examples: int | None = None  # a seeded sample of the questions, for CPU budgets
    # 5e-5: in a CPU budget of a few hundred steps it beat 2e-5 and 1e-4 (bench/passage_stage.py, 1,000 SQuAD
    # train questions: oracle-document top-1 72.8 vs 71.9 and 72.4; zero-shot 68.9)
    learning_rate: float = 5e-5
    warmup_ratio: float = 0.1
    max_seq_length: int | None = None  # None keeps the base model's
    scale: float = 20.0  # inverse temperature of the in-batch softmax (MultipleNegativesRankingLoss)
    seed: int = 42
    save_steps: int = 50
    max_minutes: float | None = None  # stop (and save) when a training iteration runs this long
    depth: int = 100  # BM25 / mining depth for positives and negatives
    progress: bool = True
    device: str = "auto"  # auto (a GPU when torch sees one), cpu, cuda: mixed precision on a GPU

    def check(self) -> TrainArgs:
        if self.iterations not in (1, 2):
            raise BadInputError(f"--iterations must be 1 or 2, got {self.iterations}")
        for name in ("batch_size", "per_kind", "depth", "save_steps"):
            if getattr(self, name) <= 0:
                raise BadInputError(f"{name.replace('_', '-')} must be positive, got {getattr(self, name)}")
        if self.iter2_init not in ("base", "iter1"):
            raise BadInputError(f"--iter2-init must be base or iter1, got {self.iter2_init!r}")
        if self.iter2_questions not in ("same", "fresh"):
            raise BadInputError(f"--iter2-questions must be same or fresh, got {self.iter2_questions!r}")
        if self.hard_negatives < 0:
            raise BadInputError("--hard-negatives must be ≥ 0")
        if self.batch_size < 2:
            raise BadInputError("--batch-size must be at least 2 (in-batch negatives need company)")
        if self.max_examples is not None and self.max_examples <= 0:
            raise BadInputError("--max-examples must be positive")
        _check_warmup(self.warmup_ratio)
        return self

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["negatives"] = list(self.negatives)
        return d


@dataclass
class RerankerArgs:
    """How ``hiera train-reranker`` trains a cross-encoder (QUEST's recipe)."""

    base_model: str = DEFAULT_MODEL
    negatives_per_positive: int = 2  # half hard (the top passages of ``negatives_from``), half random
    negatives_from: str = "bm25"  # a passage-level registry method: bm25, dense, hybrid, dhr
    batch_size: int = 32
    epochs: float = 1.0
    max_steps: int | None = None
    max_examples: int | None = None
    learning_rate: float = 8e-5  # a fresh one-logit head: 2e-5 left it near chance in a CPU budget (bench notes)
    warmup_ratio: float = 0.1
    max_length: int = 256
    seed: int = 42
    save_steps: int = 100
    max_minutes: float | None = None
    dev_fraction: float = 0.1  # questions held out to calibrate the threshold when no dev set is given
    depth: int = 100
    progress: bool = True
    device: str = "auto"  # auto (a GPU when torch sees one), cpu, cuda: mixed precision on a GPU

    def check(self) -> RerankerArgs:
        if self.negatives_per_positive < 1:
            raise BadInputError("--negatives-per-positive must be at least 1")
        from hiera.spec import method_names

        if self.negatives_from not in method_names():
            raise BadInputError(
                f"--negatives-from: unknown method {self.negatives_from!r} (one of {', '.join(method_names())})"
            )
        return self._check_fit()

    def _check_fit(self) -> RerankerArgs:
        """The checks every cross-encoder run shares (reranker and set-query classifier)."""
        if not 0.0 <= self.dev_fraction < 1.0:
            raise BadInputError("--dev-fraction must be in [0, 1)")
        if self.batch_size <= 0 or self.max_length <= 0:
            raise BadInputError("--batch-size and --max-length must be positive")
        _check_warmup(self.warmup_ratio)
        return self

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class ClassifierArgs(RerankerArgs):
    """How ``hiera train-classifier`` trains the set-query relevance classifier (QUEST's recipe).

    The training units are the atomic constraints of QUEST-format queries
    (and, with ``units="atoms+queries"``, the whole queries, which the
    undecomposed baseline classifies): each unit's known members are its
    positives, replicated to match its negatives; ``negatives`` per unit are
    half BM25's top non-members (where the unit's members are known completely)
    or known non-members, half random documents.
    """

    negatives: int = 16  # per unit; positives are replicated to match (QUEST: balanced classes)
    units: str = "atoms+queries"  # "atoms": constraints only
    atom_text: str = "parsed"  # "parsed": the set parser's constraint texts (what inference sees); "gold": metadata/<mark>
    or_positives: str = "bm25"  # a union's gold documents go to the alternative BM25 scores clearly highest; "none"
    # the lead sentence says what an entity is: 64 tokens (constraint, title, about the first sentence) keep CPU
    # training affordable (bench/quest_sets.py, a 20-minute budget on a shared 2-core machine: 64 tokens ran 235
    # steps to a held-out pair AUC of 0.955, 96 tokens 148 steps to 0.90); batches of 16 give a short run more
    # updates
    max_length: int = 64
    batch_size: int = 16
    learning_rate: float = 8e-5

    def check(self) -> ClassifierArgs:
        if self.negatives < 2:
            raise BadInputError("--negatives must be at least 2 (half BM25 or known non-members, half random)")
        if self.units not in ("atoms", "atoms+queries"):
            raise BadInputError(f"--units must be atoms or atoms+queries, got {self.units!r}")
        if self.atom_text not in ("parsed", "gold"):
            raise BadInputError(f"--atom-text must be parsed or gold, got {self.atom_text!r}")
        if self.or_positives not in ("bm25", "none"):
            raise BadInputError(f"--or-positives must be bm25 or none, got {self.or_positives!r}")
        self._check_fit()
        return self


# The reader recipe's fields that differ by device; every other field is one default for both.
# cpu: sized for a 30-minute budget on a 2-core machine (the dataclass defaults below).
# cuda: chosen by bench.reader_grid on a lent H200 over held-back SQuAD train articles (never dev): six
# recipes, reading comprehension plus BM25 EM@5 on those articles; 4e-4 beat 2e-4 and 1e-4 at 2 epochs
# (RC EM 56.4 vs 53.8 and 52.1), then 3 epochs beat 2 negatives and frozen 384-token windows (RC EM 57.1,
# EM@5 46.5), 474 steps of 64 in 15 s.
READER_DEVICE_DEFAULTS: dict[str, dict[str, Any]] = {
    "cpu": {"batch_size": 16, "learning_rate": 1e-4, "epochs": 1.0, "freeze_embeddings": True},
    "cuda": {"batch_size": 64, "learning_rate": 4e-4, "epochs": 3.0, "freeze_embeddings": False},
}


@dataclass
class ReaderArgs:
    """How ``hiera train-reader`` trains the extractive reader (DPR's recipe, sized for a CPU budget).

    Each question is a group: the passage holding its answer and
    ``negatives`` BM25 passages that do not; the span loss reads the
    positive, the selection loss ranks the group. Windows are padded per
    batch, not to ``max_length`` (most question + passage pairs are ~150
    tokens), which is most of a CPU run's speed.

    The field defaults are the CPU recipe; :meth:`for_device` gives a
    device's own recipe (a GPU trains bigger batches, longer, faster).
    """

    base_model: str = DEFAULT_MODEL
    negatives: int = 1  # BM25 passages without the answer per question (DPR: 23 on GPUs)
    batch_size: int = 16  # questions per step
    epochs: float = 1.0
    max_steps: int | None = None
    max_examples: int | None = None
    learning_rate: float = 1e-4  # fresh heads in a budget of a few hundred steps
    warmup_ratio: float = 0.1
    max_length: int = 256  # window length in tokens (question + title + passage)
    stride: int = 64  # tokens shared by neighbouring windows of a long passage
    seed: int = 42
    save_steps: int = 50
    max_minutes: float | None = None
    depth: int = 100  # BM25 depth for positives and negatives
    # the word-embedding matrix is half of MiniLM's weights: on a CPU its Adam update costs as much as the
    # rest of a step, and a few thousand questions should not move the vocabulary anyway
    freeze_embeddings: bool = True
    progress: bool = True
    device: str = "auto"  # auto (a GPU when torch sees one), cpu, cuda: mixed precision on a GPU
    # a trained reader to continue from (its encoder and both heads) instead of fresh heads on base_model:
    # how a reader trained on one phrasing of questions learns another without starting over
    init: str | None = None
    # keep part of ``init``: the saved weights are init + interpolate · (trained − init); the checkpoints hold the
    # trained weights, so another value needs no new training (a rerun resumes from the last checkpoint)
    interpolate: float | None = None

    @classmethod
    def for_device(cls, device: str = "auto", **given: Any) -> ReaderArgs:
        """The arguments for training on ``device``: its recipe (:data:`READER_DEVICE_DEFAULTS`) under ``given``.

        ``auto`` takes the recipe of the device it resolves to here (``cuda``
        where torch sees a GPU); ``cuda`` names the GPU recipe without
        needing a GPU (training on one checks that). ``device`` is kept as
        given, so the run resolves it as every trainer does.
        """
        from hiera.models import resolve_device

        key = str(device).strip().lower()
        recipe = READER_DEVICE_DEFAULTS[key if key in READER_DEVICE_DEFAULTS else resolve_device(device)]
        return cls(**{**recipe, **given, "device": device})

    def check(self) -> ReaderArgs:
        if self.negatives < 0:
            raise BadInputError("--negatives must be ≥ 0")
        if self.batch_size <= 0 or self.save_steps <= 0 or self.depth <= 0:
            raise BadInputError("--batch-size, --save-steps and --depth must be positive")
        if self.max_length < 32:
            raise BadInputError(f"--max-length must be at least 32 tokens, got {self.max_length}")
        if not 0 <= self.stride < self.max_length // 2:
            raise BadInputError(f"--stride must be in [0, max_length/2), got {self.stride}")
        if self.max_examples is not None and self.max_examples <= 0:
            raise BadInputError("--max-examples must be positive")
        if self.interpolate is not None:
            if not self.init:
                raise BadInputError("--interpolate needs --init (the reader whose weights are mixed back in)")
            if not 0 < self.interpolate <= 1:
                raise BadInputError(f"--interpolate must be in (0, 1], got {self.interpolate}")
        _check_warmup(self.warmup_ratio)
        return self

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
