"""The heads stacked into one batched product per weight give the module's vectors."""

from __future__ import annotations

import pytest
import torch

from hiera.fetchhr.rnet import RNetSet, StackedHeads


def _random_heads(layers: list[int], dim: int = 32, depth: int = 2) -> RNetSet:
    torch.manual_seed(0)
    heads = RNetSet(layers, dim, 4, 2 * dim, depth=depth).eval()
    for p in heads.parameters():  # leave the identity start: every weight random, every head different
        torch.nn.init.normal_(p, std=0.2)
    return heads


@pytest.mark.parametrize("depth", [1, 2, 3])
def test_stacked_heads_equal_the_module(depth: int) -> None:
    layers = [1, 3, 4, 6]
    heads = _random_heads(layers, depth=depth)
    states = {n: torch.randn(3, 9, 32) for n in layers}
    mask = torch.ones(3, 9, dtype=torch.long)
    mask[1, 6:] = 0  # padding: must not leak into the vectors
    mask[2, 2:] = 0
    with torch.inference_mode():
        want = heads(states, mask)
    got = StackedHeads(heads)(states, mask)
    assert list(got) == layers
    for n in layers:
        torch.testing.assert_close(got[n], want[n], rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(got[n].norm(dim=-1), torch.ones(3))


def test_a_subset_of_layers_and_padding_left_out() -> None:
    heads = _random_heads([1, 2, 3, 4, 5])
    states = {n: torch.randn(2, 7, 32) for n in (2, 5)}
    mask = torch.ones(2, 7, dtype=torch.long)
    mask[0, 4:] = 0
    stacked = StackedHeads(heads)
    with torch.inference_mode():
        want = heads(states, mask)
    got = stacked(states, mask)
    assert sorted(got) == [2, 5]
    for n in (2, 5):
        torch.testing.assert_close(got[n], want[n], rtol=1e-5, atol=1e-5)
    # what sits at padded positions changes nothing
    noisy = {n: s.clone() for n, s in states.items()}
    for s in noisy.values():
        s[0, 4:] = 100.0
    torch.testing.assert_close(stacked(noisy, mask)[5][0], got[5][0], rtol=1e-5, atol=1e-5)
    assert stacked({}, mask) == {}


def test_untrained_stacked_heads_are_the_mean_pooled_layers() -> None:
    from hiera.fetchhr.model import mean_pool

    torch.manual_seed(1)
    heads = RNetSet([2, 6], 32, 4, 64).eval()  # zero-initialised output projections: the identity start
    states = {n: torch.randn(2, 5, 32) for n in (2, 6)}
    mask = torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]])
    got = StackedHeads(heads)(states, mask)
    for n in (2, 6):
        torch.testing.assert_close(got[n], mean_pool(states[n], mask), rtol=1e-5, atol=1e-5)
