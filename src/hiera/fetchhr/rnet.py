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


class StackedHeads:
    """Every head of an :class:`RNetSet` run at once, inference only: one batched product per weight.

    The heads share their shapes, so each projection of all L heads is one
    ``baddbmm`` over weights stacked (L, in, out), and attention one
    ``scaled_dot_product_attention`` over L × batch sequences. Per query the
    heads are small matrices (a question is ~20 tokens), where PyTorch's
    per-operator overhead, not arithmetic, dominated: the module path runs
    every layer's two blocks one after another. The arithmetic is the
    module's (pre-norm, zero-started residuals, position 0 out), so the
    vectors are the same up to float rounding (tested).
    """

    def __init__(self, heads: RNetSet) -> None:
        nets = [heads.nets[f"layer{n}"] for n in heads.layers]
        self.layers = list(heads.layers)
        first = nets[0].blocks[0]
        self.num_heads = int(first.attn.num_heads)
        self.eps = float(first.norm1.eps)
        self.blocks: list[dict[str, torch.Tensor]] = []
        self._subsets: dict[tuple[int, ...], list[dict[str, torch.Tensor]]] = {}
        with torch.no_grad():
            for b in range(len(nets[0].blocks)):
                blocks = [net.blocks[b] for net in nets]

                def stack(get, blocks=blocks):  # (L, 1, ..., dim) rows for broadcasting, or (L, in, out) weights
                    return torch.stack([get(blk).detach().float() for blk in blocks]).contiguous()

                self.blocks.append({
                    "n1w": stack(lambda m: m.norm1.weight)[:, None], "n1b": stack(lambda m: m.norm1.bias)[:, None],
                    "win": stack(lambda m: m.attn.in_proj_weight.T), "bin": stack(lambda m: m.attn.in_proj_bias)[:, None],
                    "wo": stack(lambda m: m.attn.out_proj.weight.T), "bo": stack(lambda m: m.attn.out_proj.bias)[:, None],
                    "n2w": stack(lambda m: m.norm2.weight)[:, None], "n2b": stack(lambda m: m.norm2.bias)[:, None],
                    "w1": stack(lambda m: m.ffn[0].weight.T), "b1": stack(lambda m: m.ffn[0].bias)[:, None],
                    "w2": stack(lambda m: m.ffn[-1].weight.T), "b2": stack(lambda m: m.ffn[-1].bias)[:, None],
                })

    def __call__(self, states: dict[int, torch.Tensor], mask: torch.Tensor) -> dict[int, torch.Tensor]:
        """``states[layer]`` (batch, tokens, dim), some or all of the heads' layers → ``{layer: (batch, dim)}`` unit vectors."""
        layers = [n for n in self.layers if n in states]
        if not layers:
            return {}
        pick = [self.layers.index(n) for n in layers]
        with torch.inference_mode():
            hidden = torch.stack([states[n].float() for n in layers])  # (L, B, T, D)
            n_l, n_b, n_t, dim = hidden.shape
            m = mask.to(hidden.dtype)[None, :, :, None]
            pooled = (hidden * m).sum(2, keepdim=True) / m.sum(2, keepdim=True).clamp(min=1.0)
            x = torch.cat([pooled, hidden], dim=2).reshape(n_l, n_b * (n_t + 1), dim)  # (L, B·T1, D)
            # (B, T1) True where attention may look: the tokens, not padding, and not the pooled position 0,
            # which RNet.forward's key padding mask leaves out too (its heads were trained so)
            keep = torch.cat([torch.zeros_like(mask[:, :1]), mask], dim=1) != 0
            attend = keep[None, :, None, None, :].expand(n_l, n_b, 1, 1, n_t + 1).reshape(n_l * n_b, 1, 1, n_t + 1)
            last = len(self.blocks) - 1
            for i, w in enumerate(self._weights(tuple(pick))):
                x = self._block(x, w, attend, n_b, n_t + 1, first_only=i == last)
            out = x.reshape(n_l, n_b, -1, dim)[:, :, 0]
            out = torch.nn.functional.normalize(out, dim=-1)
        return {n: out[j] for j, n in enumerate(layers)}

    def _weights(self, pick: tuple[int, ...]) -> list[dict[str, torch.Tensor]]:
        """The stacked weights of the heads at ``pick`` (indices into ``layers``), gathered once per subset."""
        if len(pick) == len(self.layers):
            return self.blocks
        if pick not in self._subsets:
            self._subsets[pick] = [{k: v[list(pick)].contiguous() for k, v in w.items()} for w in self.blocks]
        return self._subsets[pick]

    def _block(self, x: torch.Tensor, w: dict[str, torch.Tensor], attend: torch.Tensor, n_b: int, n_t: int,
               first_only: bool) -> torch.Tensor:
        n_l, _, dim = x.shape
        h, hd = self.num_heads, dim // self.num_heads
        y = torch.nn.functional.layer_norm(x, (dim,), eps=self.eps) * w["n1w"] + w["n1b"]
        if first_only:
            y0 = y.reshape(n_l, n_b, n_t, dim)[:, :, 0]  # (L, B, D)
            q = torch.baddbmm(w["bin"][..., :dim], y0, w["win"][..., :dim])
            kv = torch.baddbmm(w["bin"][..., dim:], y, w["win"][..., dim:])
            k, v = kv[..., :dim], kv[..., dim:]
            n_q = 1
            x = x.reshape(n_l, n_b, n_t, dim)[:, :, 0]
        else:
            qkv = torch.baddbmm(w["bin"], y, w["win"])
            q, k, v = qkv[..., :dim], qkv[..., dim : 2 * dim], qkv[..., 2 * dim :]
            n_q = n_t

        def heads(t: torch.Tensor, n: int) -> torch.Tensor:  # (L, B·n, D) → (L·B, h, n, hd)
            return t.reshape(n_l * n_b, n, h, hd).transpose(1, 2)

        a = torch.nn.functional.scaled_dot_product_attention(heads(q, n_q), heads(k, n_t), heads(v, n_t),
                                                             attn_mask=attend)
        a = a.transpose(1, 2).reshape(n_l, n_b * n_q, dim)
        x = x.reshape(n_l, n_b * n_q, dim)
        x = x + torch.baddbmm(w["bo"], a, w["wo"])
        z = torch.nn.functional.layer_norm(x, (dim,), eps=self.eps) * w["n2w"] + w["n2b"]
        z = torch.nn.functional.gelu(torch.baddbmm(w["b1"], z, w["w1"]))
        return x + torch.baddbmm(w["b2"], z, w["w2"])
