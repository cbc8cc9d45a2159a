"""At full size on the GPU: O, LSE and gradients against plain attention in fp32."""

import pytest
import torch

pytestmark = pytest.mark.gpu

CASES = [  # (dtype, head_dim, causal)
    (torch.bfloat16, 128, True),
    (torch.bfloat16, 128, False),
    (torch.bfloat16, 64, True),
    (torch.float16, 64, False),
    (torch.float32, 64, True),
    (torch.float32, 128, False),
]


@pytest.mark.points(2)
@pytest.mark.parametrize(("dtype", "head_dim", "causal"), CASES,
                         ids=lambda c: str(c).replace("torch.", ""))
def test_matches_reference_full_size_gpu(dtype, head_dim, causal, qkv_factory, attention_check):
    # B * N = 8k tokens, H * d = 2048 (the perf shapes at N = 4096, half the batch).
    q, k, v, do = qkv_factory(2, 2048 // head_dim, 2048 // head_dim, 4096, head_dim, dtype, "cuda",
                              seed=20)
    attention_check(q, k, v, do, causal=causal, rtol=1e-2, atol=1e-2)
