"""The course LLaMA's real weights and its real layer-0 activations (embedding -> RMSNorm)."""

import math

import pytest
import torch
from quant import INT4_G128, Int8KVCache, IntQuantConfig, awq_search, fake_quant, quantized_attention

LAYERS = (0, 4)  # the first and the last of the 5 layers
LINEARS = ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
           "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj")


def layer0_input(sd: dict[str, torch.Tensor], n_tokens: int, seed: int) -> torch.Tensor:
    """What layer 0's q/k/v projections see: RMSNorm(embedding rows) * gain, (n_tokens, 384)."""
    table = sd["model.embed_tokens.weight"]  # (8192, 384)
    ids = torch.randint(2, table.shape[0], (n_tokens,), generator=torch.Generator().manual_seed(seed))
    h = table[ids]
    return h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-5) * sd["model.layers.0.input_layernorm.weight"]


def rel_err(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a - b).norm() / b.norm())


@pytest.mark.points(3)
def test_int4_groups_of_128_beat_per_channel_scales_on_every_real_linear(course_model, oracles, tol):
    g128 = IntQuantConfig(4, False, "group", 128)
    channel = IntQuantConfig(4, False, "channel")
    worst = 0.0
    for layer in LAYERS:
        for name in LINEARS:
            w = course_model[f"model.layers.{layer}.{name}.weight"]
            wq = fake_quant(w, g128)
            torch.testing.assert_close(wq, oracles.int(w, 4, False, "group", 128)[3], **tol("exact"))
            worst = max(worst, rel_err(wq, w) / rel_err(fake_quant(w, channel), w))
    # The reference measured a ratio of 0.76-0.89 over all 35 linears of the model (0.100 vs 0.114
    # relative error for layer 0's q_proj); gate: every one below 0.95.
    assert worst < 0.95


@pytest.mark.points(1)
def test_int8_per_channel_keeps_real_weights_within_one_percent(course_model):
    cfg = IntQuantConfig(8, True, "channel")
    for layer in LAYERS:
        w = course_model[f"model.layers.{layer}.mlp.down_proj.weight"]
        # The reference measured 0.84% and 0.87% (at most 0.87% over all linears).
        assert rel_err(fake_quant(w, cfg), w) < 0.01


@pytest.mark.points(2)
def test_awq_on_a_real_projection_starts_at_rtn_and_never_loses(course_model, oracles, tol):
    x = layer0_input(course_model, 256, seed=0)
    w = course_model["model.layers.0.self_attn.v_proj.weight"]  # (128, 384)
    r = awq_search(x, w, INT4_G128, grid=10)
    rtn = oracles.int(w, 4, False, "group", 128)[3]
    expected_rtn = float(((x @ w.T - x @ rtn.T) ** 2).mean())
    torch.testing.assert_close(torch.tensor(r.errors[0]), torch.tensor(expected_rtn), **tol("fp32 loss"))
    assert min(r.errors) == r.errors[round(r.alpha * 10)] <= r.errors[0]
    # The reference measured AWQ / RTN = 0.944 here (alpha = 1): the course model's layer-0 inputs
    # have no outlier channels (max / median channel range 1.9), so the gain is small.
    assert min(r.errors) < 0.99 * r.errors[0]


@pytest.mark.points(2)
def test_decode_from_an_int8_cache_of_real_keys_and_values(course_model):
    x = layer0_input(course_model, 48, seed=1)  # (48, 384): 47 cached tokens and one query
    wq, wk, wv = (course_model[f"model.layers.0.self_attn.{p}_proj.weight"] for p in "qkv")
    q = (x[-1:] @ wq.T).view(1, 1, 6, 64).transpose(1, 2)  # (1, 6, 1, 64)
    k = (x @ wk.T).view(1, 48, 2, 64).transpose(1, 2)  # (1, 2, 48, 64)
    v = (x @ wv.T).view(1, 48, 2, 64).transpose(1, 2)
    cache = Int8KVCache(1, 2, 64, 64)
    cache.append(k, v)
    out = quantized_attention(q, cache, causal=True)
    kr, vr = k.repeat_interleave(3, dim=1), v.repeat_interleave(3, dim=1)
    exact = torch.softmax(q.double() @ kr.double().transpose(-1, -2) / math.sqrt(64), -1) @ vr.double()
    # int8 per token: the reference measured 0.81% of the output's norm; gate at 2%.
    assert rel_err(out.double(), exact) < 0.02
