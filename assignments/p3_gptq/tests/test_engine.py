"""gptq.engine's parts: the fast-path group size, and the W4A16 layer against the dequantized weight
(the engine serving a whole folder: test_engine_serving.py)."""

import pytest
import torch
from gptq.engine import W4A16Linear, sequential_group_size

KEYS = ("qweight", "qzeros", "scales", "g_idx")


@pytest.mark.kernels()  # no kernel: reads g_idx
@pytest.mark.parametrize("case", ["g128", "partial-last-group", "one-group", "g1", "act-order", "uneven",
                                  "no-group-0"])
def test_sequential_group_size_finds_the_fast_path(case):
    g_idx, expected = {
        "g128": (torch.arange(256) // 128, 128),
        "partial-last-group": (torch.arange(320) // 128, 128),
        "one-group": (torch.zeros(64, dtype=torch.int64), 64),
        "act-order": ((torch.arange(256) // 32)[torch.randperm(256, generator=torch.Generator().manual_seed(0))], 0),
        "g1": (torch.arange(16), 1),  # every channel its own group: still sequential
        "uneven": (torch.tensor([0, 0, 1, 1, 1, 1, 1, 1]), 0),  # groups of 2 and 6: no single size
        "no-group-0": (torch.ones(8, dtype=torch.int64), 0),  # not a layout the fast path reads
    }[case]
    assert sequential_group_size(g_idx.to(torch.int32)) == expected


@pytest.mark.parametrize("act", [False, True], ids=["sequential", "act-order"])
def test_w4a16_linear_matches_the_dequantized_weight(oracles, tol, device, act):
    t, w = oracles.random_v1(256, 72, 64, act, seed=50)
    layer = W4A16Linear(*(t[key].to(device) for key in KEYS), group_size=0 if act else 64)
    x = torch.randn(2, 3, 256, generator=torch.Generator().manual_seed(51)).bfloat16()
    y = layer(x.to(device)).cpu()
    assert y.shape == (2, 3, 72) and y.dtype == torch.bfloat16
    ref = x.float() @ w.T
    floor = float(((x.float() @ w.bfloat16().float().T).bfloat16().float() - ref).abs().mean() / ref.abs().mean())
    err = float((y.float() - ref).abs().mean() / ref.abs().mean())
    assert err < floor + tol("w4a16, bf16")["rtol"], f"rel error {err:.2e}, bound {floor:.2e} + 1e-3"
