"""The per-layer heads' transformer layers."""

from __future__ import annotations


def test_rnet_last_layer_shortcut_matches_the_full_computation() -> None:
    import torch

    from hiera.fetchhr.rnet import PreNormLayer

    torch.manual_seed(0)
    layer = PreNormLayer(16, 4, 32, dropout=0.0).eval()
    for p in layer.parameters():  # leave the identity start: random weights everywhere
        torch.nn.init.normal_(p, std=0.2)
    x = torch.randn(3, 7, 16)
    pad = torch.zeros(3, 7, dtype=torch.bool)
    pad[0, 5:] = True
    with torch.no_grad():
        full = layer(x, pad)[:, 0]
        first = layer(x, pad, first_only=True)[:, 0]
    torch.testing.assert_close(first, full, rtol=1e-5, atol=1e-5)
