"""FetchHR's query model: untrained heads start where the model-free baseline is."""

from __future__ import annotations


def test_untrained_heads_start_at_the_mean_pooled_layer_with_unit_norm() -> None:
    import torch

    from hiera.fetchhr.model import mean_pool
    from hiera.fetchhr.rnet import RNetSet

    torch.manual_seed(0)
    heads = RNetSet([2, 5], 32, 4, 64).eval()
    states = {2: torch.randn(4, 6, 32), 5: torch.randn(4, 6, 32)}
    mask = torch.ones(4, 6, dtype=torch.long)
    mask[1, 3:] = 0
    with torch.no_grad():
        out = heads(states, mask)
    for n in (2, 5):
        assert out[n].shape == (4, 32)
        torch.testing.assert_close(out[n].norm(dim=-1), torch.ones(4))
        torch.testing.assert_close(out[n], mean_pool(states[n], mask), rtol=1e-5, atol=1e-5)
