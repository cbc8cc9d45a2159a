"""Shared by tests/ and hidden/: tolerances, and the oracles, all run in the judge (never the
package):

- RoPE: transformers' ROPE_INIT_FUNCTIONS on a LlamaConfig carrying the same rope_parameters;
- attention: torch's scaled_dot_product_attention over the whole sequence with a boolean mask the
  test builds from positions itself;
- routing: transformers' DeepseekV3TopkRouter / DeepseekV3MoE with the same weights, and the
  Mixtral module's load_balancing_loss_func for Switch's auxiliary loss.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from autograder.testing import tolerances

try:  # transformers' config warnings (unused keys of a small config) are noise in a report
    from transformers.utils import logging as _hf_logging

    _hf_logging.set_verbosity_error()
except ImportError:  # pragma: no cover
    pass

_TOLERANCES = tolerances(Path(__file__).parent)


@pytest.fixture(scope="session")
def tol():
    """tol(name) -> {"rtol": r, "atol": a}: the tolerance `name` of assignment.toml's [tolerances]."""
    return _TOLERANCES


# ---------------------------------------------------------------- RoPE

def hf_rope(dim: int, base: float, params: dict | None, seq_len: int | None = None) -> tuple[torch.Tensor, float]:
    """transformers' (inv_freq, attention factor) for `params` (rope_parameters keys)."""
    from transformers import LlamaConfig
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    params = dict(params or {"rope_type": "default"})
    kind = params["rope_type"]
    original = params.get("original_max_position_embeddings", 4096)
    longest = int(original * params.get("factor", 1.0)) + 1
    if kind == "dynamic":  # transformers' dynamic scaling reads the training length from the model config
        params.pop("original_max_position_embeddings", None)
        longest = original
    config = LlamaConfig(hidden_size=2 * dim, num_attention_heads=2, head_dim=dim, max_position_embeddings=longest,
                         rope_parameters={**params, "rope_theta": base})
    if kind == "default":
        return 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim)), 1.0
    inv_freq, factor = ROPE_INIT_FUNCTIONS[kind](config, None, seq_len=seq_len)
    return inv_freq.float(), float(factor)


# ---------------------------------------------------------------- attention

def mask_from_positions(q_pos: torch.Tensor, k_pos: torch.Tensor, causal: bool, window: int | None) -> torch.Tensor:
    """(Tq, Tk) bool: key j visible from query i (j <= i if causal; i - window < j)."""
    i, j = q_pos[:, None], k_pos[None, :]
    mask = torch.ones(len(q_pos), len(k_pos), dtype=torch.bool)
    if causal:
        mask &= j <= i
    if window is not None:
        mask &= j > i - window
    return mask


def sdpa_reference(q, k, v, causal: bool, window: int | None) -> torch.Tensor:
    """Whole-sequence attention, (B, H, T, D), fp32: SDPA with the mask of positions 0..T-1."""
    pos = torch.arange(q.shape[-2])
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask_from_positions(pos, pos, causal, window))


def zigzag_or_contiguous(seq_len: int, rank: int, world: int, layout: str) -> torch.Tensor:
    """The judge's own shard positions (the handout's definition)."""
    if layout == "contiguous":
        size = seq_len // world
        return torch.arange(rank * size, (rank + 1) * size)
    size = seq_len // (2 * world)
    chunks = (rank, 2 * world - 1 - rank)
    return torch.cat([torch.arange(c * size, (c + 1) * size) for c in chunks])


# ---------------------------------------------------------------- routing

def dense_routing(weights: torch.Tensor, indices: torch.Tensor, num_experts: int) -> torch.Tensor:
    """(T, k) weights and indices -> (T, E) with each token's weight at its experts (order-free)."""
    out = torch.zeros(weights.shape[0], num_experts, dtype=torch.float32)
    return out.scatter_add_(1, indices.long(), weights.float())


def deepseek_moe(hidden: int, experts: int, top_k: int, n_group: int, topk_group: int, scaling: float,
                 norm: bool, seed: int, shared: int = 1, bias_scale: float = 0.3):
    """transformers' DeepseekV3MoE with random weights (and a random score-correction bias), and
    the same weights as the package's params dict."""
    from transformers import DeepseekV3Config
    from transformers.models.deepseek_v3.modeling_deepseek_v3 import DeepseekV3MoE

    config = DeepseekV3Config(hidden_size=hidden, n_routed_experts=experts, n_group=n_group, topk_group=topk_group,
                              num_experts_per_tok=top_k, moe_intermediate_size=12, n_shared_experts=max(shared, 1),
                              routed_scaling_factor=scaling, norm_topk_prob=norm, hidden_act="silu")
    torch.manual_seed(seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        moe = DeepseekV3MoE(config).float()
    with torch.no_grad():
        for p in moe.parameters():
            p.normal_(0, 0.5)
        moe.gate.e_score_correction_bias.normal_(0, bias_scale)
    gate_up = moe.experts.gate_up_proj.detach()
    inter = gate_up.shape[1] // 2
    params = {"router.weight": moe.gate.weight.detach().clone(),
              "router.bias": moe.gate.e_score_correction_bias.detach().clone(),
              "experts.gate": gate_up[:, :inter].clone(), "experts.up": gate_up[:, inter:].clone(),
              "experts.down": moe.experts.down_proj.detach().clone()}
    if shared:
        s = moe.shared_experts
        params.update({"shared.gate": s.gate_proj.weight.detach().clone(), "shared.up": s.up_proj.weight.detach().clone(),
                       "shared.down": s.down_proj.weight.detach().clone()})
    return moe, params


def hf_gate(moe, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """transformers' router: (weights (T, k), indices (T, k))."""
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _, weights, indices = moe.gate(x)
    return weights, indices


def choices_change_with_the_bias(moe, x: torch.Tensor) -> bool:
    """Whether transformers' router picks other experts for some token once the bias is zeroed."""
    import copy

    plain = copy.deepcopy(moe)
    with torch.no_grad():
        plain.gate.e_score_correction_bias.zero_()
    chosen = [dense_routing(*hf_gate(m, x), m.gate.num_experts) > 0 for m in (moe, plain)]
    return not torch.equal(chosen[0], chosen[1])


def hf_moe_output(moe, x: torch.Tensor, shared: bool = True) -> torch.Tensor:
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if shared:
            return moe(x)
        weights, indices = hf_gate(moe, x)
        return moe.experts(x.reshape(-1, x.shape[-1]), indices, weights).reshape(x.shape)


def hf_switch_loss(logits: torch.Tensor, top_k: int) -> torch.Tensor:
    from transformers.models.mixtral.modeling_mixtral import load_balancing_loss_func

    return load_balancing_loss_func((logits,), logits.shape[-1], top_k)
