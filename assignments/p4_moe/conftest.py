"""Shared by tests/ and hidden/: tolerances, and the oracles, all run in the judge (never the
package):

- the dense single-process MoE: transformers' DeepseekV3MoE (router with its score-correction bias,
  routed experts, shared expert) holding the same weights as the ranks' shards;
- the DP block: attention and RMSNorm written here from their definitions (softmax of masked
  scores, one request at a time), the MoE by transformers;
- dispatch's expected rows: recomputed here from every rank's inputs by the handout's order;
- EPLB's placement: the handout's two greedy steps, written again here.
Triton kernels run in its CPU interpreter when there is no GPU; TRITON_INTERPRET must be set before
triton is first imported, hence here.
"""

from __future__ import annotations  # noqa: I001 (the grader's imports first, then torch)

import math
import os
import warnings
from pathlib import Path

import pytest
import torch
from autograder.testing import tolerances

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")
torch.set_num_threads(1)  # small tensors on a shared 2-core machine: threads cost more than they save

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


@pytest.fixture
def device() -> str:
    """Where kernels run: the GPU when there is one, else Triton's CPU interpreter."""
    return "cuda" if torch.cuda.is_available() else "cpu"


# ---------------------------------------------------------------- the dense MoE (transformers)

def deepseek_moe(gate: dict, hidden: int, seed: int, shared: bool = True, bias_scale: float = 0.5):
    """transformers' DeepseekV3MoE with random weights (and a random score-correction bias), and the
    same weights as one dict of whole tensors (experts stacked by logical id). gate: top_k,
    num_experts, n_group, topk_group, routed_scaling_factor, norm_topk_prob."""
    from transformers import DeepseekV3Config
    from transformers.models.deepseek_v3.modeling_deepseek_v3 import DeepseekV3MoE

    config = DeepseekV3Config(hidden_size=hidden, n_routed_experts=gate["num_experts"], n_group=gate["n_group"],
                              topk_group=gate["topk_group"], num_experts_per_tok=gate["top_k"],
                              moe_intermediate_size=12, n_shared_experts=1, hidden_act="silu",
                              routed_scaling_factor=gate["routed_scaling_factor"], norm_topk_prob=gate["norm_topk_prob"])
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


def hf_moe(moe, x: torch.Tensor, shared: bool = True) -> torch.Tensor:
    """The dense MoE's output for x (T, H) (routed experts only when not `shared`)."""
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if shared:
            return moe(x[None])[0]
        _, weights, indices = moe.gate(x)
        return moe.experts(x, indices, weights)


def hf_router(moe, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _, weights, indices = moe.gate(x)
    return weights, indices


def dense_routing(weights: torch.Tensor, indices: torch.Tensor, num_experts: int) -> torch.Tensor:
    """(T, k) weights and indices -> (T, E) with each token's weight at its experts (order-free)."""
    out = torch.zeros(weights.shape[0], num_experts, dtype=torch.float32)
    return out.scatter_add_(1, indices.long(), weights.float())


def shard(params: dict, slots: tuple[int, ...]) -> dict:
    """One rank's params: the router and shared expert whole, the routed experts of its slots only."""
    mine = {k: v.clone() for k, v in params.items() if not k.startswith("experts.")}
    index = torch.tensor(slots, dtype=torch.int64)
    mine.update({k: v[index].clone() for k, v in params.items() if k.startswith("experts.")})
    return mine


# ---------------------------------------------------------------- the DP block's oracle

def rms_norm_oracle(x: torch.Tensor, w: torch.Tensor, eps: float) -> torch.Tensor:
    return x / torch.sqrt((x * x).mean(-1, keepdim=True) + eps) * w


def attention_oracle(x: torch.Tensor, p: dict, heads: int) -> torch.Tensor:
    """Causal multi-head attention of one request, by the definition: softmax(q k^T / sqrt(d) + mask) v."""
    t, h = x.shape
    d = h // heads
    q, k, v = ((x @ p[f"attn.{n}"].T).view(t, heads, d).transpose(0, 1) for n in "qkv")
    scores = q @ k.transpose(-1, -2) / math.sqrt(d)
    scores = scores.masked_fill(torch.ones(t, t, dtype=torch.bool).triu(1), float("-inf"))
    return (torch.softmax(scores, dim=-1) @ v).transpose(0, 1).reshape(t, h) @ p["attn.o"].T


def block_oracle(requests: list[torch.Tensor], p: dict, moe, heads: int, eps: float = 1e-6) -> list[torch.Tensor]:
    """Every request of every rank through the block in one process: attention per request, the
    dense MoE over the tokens."""
    out = []
    for x in requests:
        h = x + attention_oracle(rms_norm_oracle(x, p["norm.attn"], eps), p, heads)
        out.append(h + hf_moe(moe, rms_norm_oracle(h, p["norm.moe"], eps)))
    return out


def block_params(hidden: int, seed: int) -> dict:
    g = torch.Generator().manual_seed(seed)
    p = {f"attn.{n}": torch.randn(hidden, hidden, generator=g) / math.sqrt(hidden) for n in "qkvo"}
    p.update({f"norm.{n}": 1 + 0.1 * torch.randn(hidden, generator=g) for n in ("attn", "moe")})
    return p


# ---------------------------------------------------------------- dispatch: the expected rows

def expected_dispatch(xs: list[torch.Tensor], slots: list[torch.Tensor], per_rank: int, dest: int):
    """What rank `dest` must receive: (rows (N, H), local slots (N,), recv_counts). Source rank by
    source rank; within a source, its (token, choice) pairs bound for `dest` ordered by slot, then
    token, then choice."""
    rows, local, counts = [], [], []
    for x, s in zip(xs, slots):
        pairs = sorted((int(s[t, c]), t, c) for t in range(s.shape[0]) for c in range(s.shape[1])
                       if int(s[t, c]) // per_rank == dest)
        counts.append(len(pairs))
        rows += [x[t] for _, t, _ in pairs]
        local += [slot % per_rank for slot, _, _ in pairs]
    width = xs[0].shape[1]
    return (torch.stack(rows) if rows else torch.zeros(0, width), torch.tensor(local, dtype=torch.int64), counts)


# ---------------------------------------------------------------- EPLB, by the handout's rule

def eplb_oracle(load: list[float], world: int, per_rank: int) -> tuple[tuple[int, ...], ...]:
    e = len(load)
    count = [1] * e
    for _ in range(world * per_rank - e):
        open_ = [i for i in range(e) if count[i] < world] or list(range(e))
        count[max(open_, key=lambda i: (load[i] / count[i], -i))] += 1
    replicas = sorted(((load[i] / count[i], i) for i in range(e) for _ in range(count[i])), key=lambda r: (-r[0], r[1]))
    hosted, total = [[] for _ in range(world)], [0.0] * world
    for share, i in replicas:
        free = [r for r in range(world) if len(hosted[r]) < per_rank]
        rank = min([r for r in free if i not in hosted[r]] or free, key=lambda r: (total[r], r))
        hosted[rank].append(i)
        total[rank] += share
    return tuple(tuple(sorted(h)) for h in hosted)


def loads_oracle(slots: tuple[tuple[int, ...], ...], load: list[float]) -> list[float]:
    """Each rank's tokens when an expert's load splits evenly over its replicas."""
    n = [sum(row.count(i) for row in slots) for i in range(len(load))]
    return [sum(load[i] / n[i] for i in row) for row in slots]


def skewed_load(num_experts: int, tokens: int, top_k: int, zipf: float, seed: int) -> list[float]:
    """(token, choice) pairs per expert on a Zipf-skewed trace (Gumbel top-k), drawn here."""
    g = torch.Generator().manual_seed(seed)
    popularity = (1.0 + torch.randperm(num_experts, generator=g).float()) ** -zipf
    u = torch.rand(tokens, num_experts, generator=g).clamp_(1e-12, 1 - 1e-7)
    chosen = (popularity.log() - torch.log(-torch.log(u))).topk(top_k, dim=-1).indices
    return torch.bincount(chosen.reshape(-1), minlength=num_experts).float().tolist()
