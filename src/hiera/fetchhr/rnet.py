"""The retrieval network (RNet) of one encoder layer: two transformer layers, output at position 0.

Ennen et al.'s eq. 3 places the residual connection *outside* the layer norm
(pre-norm: ``x + f(LN(x))``), so the identity path from a layer's hidden
states to the head's output is never renormalized. We use that to start
from a sensible point: position 0 is a pooled token (the masked mean of the
layer's hidden states — all-MiniLM-L6-v2 was trained with mean pooling, its
CLS state is not a sentence vector) prepended to the tokens, and the last
projection of each sub-layer starts at zero. An untrained head therefore
returns the mean-pooled layer, which for the last layer is exactly the
encoder's own query vector (the ``dense`` baseline); training moves each head
from there, with every other weight randomly initialised.
"""

from __future__ import annotations

import torch
from torch import nn


class PreNormLayer(nn.Module):
    """``h = x + Drop(MHA(LN(x)))``, ``out = h + Drop(FFN(LN(h)))`` (residuals outside the norms)."""

    def __init__(self, dim: int, heads: int, ffn: int, dropout: float) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(dim)
        self.attn = nn.MultiheadAttention(dim, heads, dropout=dropout, batch_first=True)
        self.norm2 = nn.LayerNorm(dim)
        self.ffn = nn.Sequential(nn.Linear(dim, ffn), nn.GELU(), nn.Dropout(dropout), nn.Linear(ffn, dim))
        self.drop = nn.Dropout(dropout)
        # zero last projections: the layer starts as the identity (see the module docstring)
        nn.init.zeros_(self.attn.out_proj.weight)
        nn.init.zeros_(self.attn.out_proj.bias)
        nn.init.zeros_(self.ffn[-1].weight)
        nn.init.zeros_(self.ffn[-1].bias)

    def forward(self, x: torch.Tensor, pad: torch.Tensor, first_only: bool = False) -> torch.Tensor:
        """``x`` (batch, tokens, dim); ``pad`` (batch, tokens) is True at padding.

        ``first_only``: compute position 0 alone (its attention still reads every
        token) — all the head's last layer needs, at a fraction of the cost.
        """
        y = self.norm1(x)
        q = y[:, :1] if first_only else y
        a, _ = self.attn(q, y, y, key_padding_mask=pad, need_weights=False)
        x = (x[:, :1] if first_only else x) + self.drop(a)
        return x + self.drop(self.ffn(self.norm2(x)))


class RNet(nn.Module):
    """One layer's head: pooled token + the layer's hidden states → 2 pre-norm layers → position 0."""

    def __init__(self, dim: int, heads: int, ffn: int, depth: int = 2, dropout: float = 0.1) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(PreNormLayer(dim, heads, ffn, dropout) for _ in range(depth))

    def forward(self, hidden: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """``hidden`` (batch, tokens, dim), ``mask`` (batch, tokens) 1 at real tokens → (batch, dim), unnormalized."""
        m = mask.to(hidden.dtype).unsqueeze(-1)
        pooled = (hidden * m).sum(1) / m.sum(1).clamp(min=1.0)
        x = torch.cat([pooled.unsqueeze(1), hidden], dim=1)
        pad = torch.cat([torch.zeros_like(mask[:, :1]), mask], dim=1) == 0
        last = len(self.blocks) - 1
        for i, block in enumerate(self.blocks):
            x = block(x, pad, first_only=i == last)
        return x[:, 0]


class RNetSet(nn.Module):
    """One RNet per retrieving layer, keyed ``"layer{N}"``; outputs are L2-normalized (cosine with passages)."""

    def __init__(self, layers: list[int], dim: int, heads: int, ffn: int, depth: int = 2, dropout: float = 0.1) -> None:
        super().__init__()
        self.layers = list(layers)
        self.nets = nn.ModuleDict({f"layer{n}": RNet(dim, heads, ffn, depth, dropout) for n in self.layers})

    def forward(self, states: dict[int, torch.Tensor], mask: torch.Tensor) -> dict[int, torch.Tensor]:
        """``states[layer]`` (batch, tokens, dim) → ``{layer: (batch, dim)}`` unit vectors."""
        return {n: nn.functional.normalize(self.nets[f"layer{n}"](states[n], mask), dim=-1) for n in states}
