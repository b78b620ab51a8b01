"""Which encoder layers retrieve, and how many passages each fetches: parsed once, one-line errors.

Kept free of torch and FAISS so the retriever can check a request before it
loads anything.
"""

from __future__ import annotations

from collections.abc import Sequence

from hiera.errors import BadInputError


def parse_layers(spec: str | Sequence[int] | None, available: Sequence[int]) -> list[int]:
    """``"1-6"``, ``"1,3,6"``, ``"6"`` or a list → sorted distinct layers, each one of ``available``.

    ``None`` means every available layer. Layers are 1-based (layer 1 is the
    first transformer block; the embeddings are not a layer).
    """
    avail = sorted(int(a) for a in available)
    if spec is None:
        return avail
    if isinstance(spec, str):
        out: list[int] = []
        for part in spec.replace(" ", "").split(","):
            if not part:
                continue
            lo, dash, hi = part.partition("-")
            try:
                a, b = (int(lo), int(hi)) if dash else (int(part), int(part))
            except ValueError:
                raise BadInputError(f"layers={spec!r}: write layer numbers like 1-6 or 1,3,6") from None
            if a > b:
                raise BadInputError(f"layers={spec!r}: the range {part} runs backwards")
            out += range(a, b + 1)
    else:
        out = [int(x) for x in spec]
    if not out:
        raise BadInputError(f"layers={spec!r} names no layer; give e.g. 1-6 or 1,3,6")
    bad = sorted({x for x in out if x not in avail})
    if bad:
        span = f"{avail[0]}-{avail[-1]}" if avail == list(range(avail[0], avail[-1] + 1)) else ",".join(map(str, avail))
        raise BadInputError(f"layers={spec!r}: layer {bad[0]} is not one this model retrieves from ({span})")
    return sorted(set(out))


def parse_k_per_layer(
    spec: str | int | Sequence[int] | None, n_layers: int, k: int, last_share: float = 0.0
) -> list[int]:
    """Passages each of ``n_layers`` layers fetches: one number for all, or one per layer.

    ``None`` splits ``k`` (the search's hit count, the paper's budget) so
    the layers together return ``k`` passages. With ``last_share`` 0 the
    split is as even as it goes (the paper's Table 1), the later layers
    taking the remainder; with fewer hits than layers the last ``k`` layers
    fetch one each (the later layers are the more precise) and the others
    none: ``hiera search --k 3`` must not be an error. With ``last_share``
    s > 0 the last layer fetches round(s·k) and the earlier layers split the
    rest evenly: the earlier layers' heads are the weaker retrievers, so
    their passages are best spent on what the last layer misses (the
    paper's Table 4 varies the allocation too).
    """
    if spec is None:
        if last_share > 0 and n_layers > 1:
            last = max(1, min(k, round(last_share * k)))
            return [*_even(k - last, n_layers - 1), last]
        return _even(k, n_layers)
    if isinstance(spec, int):
        values = [spec]
    elif isinstance(spec, str):
        try:
            values = [int(x) for x in spec.replace(" ", "").split(",") if x]
        except ValueError:
            raise BadInputError(f"k_per_layer={spec!r}: give one number or one per layer, like 10 or 5,5,20") from None
    else:
        values = [int(x) for x in spec]
    if not values:
        raise BadInputError(f"k_per_layer={spec!r} is empty; give one number or one per layer")
    if len(values) == 1:
        values = values * n_layers
    if len(values) != n_layers:
        raise BadInputError(f"k_per_layer={spec!r} gives {len(values)} budgets for {n_layers} layers; give one or {n_layers}")
    if any(v <= 0 for v in values):
        raise BadInputError(f"k_per_layer={spec!r}: every layer's budget must be a positive integer")
    return values


def _even(k: int, n: int) -> list[int]:
    base, extra = divmod(k, n)
    return [base + (1 if i >= n - extra else 0) for i in range(n)]
