"""The expert-parallel DeepSeek-V3 MoE layer on one EP rank: route locally, dispatch, the rank's own
experts, combine, plus the shared expert (replicated: every rank runs it on its own tokens).

params on rank r (fp32 or bf16 tensors):
  "router.weight" (E, H), "router.bias" (E,)                     replicated
  "experts.gate" (S, I, H), "experts.up" (S, I, H), "experts.down" (S, H, I)
        only this rank's S slots, stacked in placement.slots[r]'s order
  "shared.gate" (I_s, H), "shared.up" (I_s, H), "shared.down" (H, I_s)   optional, replicated
"""

from __future__ import annotations

import torch.distributed as dist
from torch import Tensor

from epmoe.config import MoEConfig
from epmoe.dispatch import combine, dispatch
from epmoe.experts import experts_grouped, experts_loop, swiglu
from epmoe.placement import ExpertPlacement, assign_replicas
from epmoe.routing import route

ROUTED = ("router.weight", "router.bias", "experts.gate", "experts.up", "experts.down")


def check_params(params: dict[str, Tensor], placement: ExpertPlacement, cfg: MoEConfig) -> None:
    missing = [name for name in ROUTED if name not in params]
    if missing:
        raise ValueError(f"ep_moe_forward: params lack {missing}")
    if params["experts.gate"].shape[0] != placement.slots_per_rank:
        raise ValueError(f"ep_moe_forward: {params['experts.gate'].shape[0]} local experts, the placement has "
                         f"{placement.slots_per_rank} slots a rank")
    if placement.world != dist.get_world_size() or placement.num_experts != cfg.num_experts:
        raise ValueError(f"ep_moe_forward: a placement of {placement.num_experts} experts on {placement.world} "
                         f"ranks, but {cfg.num_experts} experts and {dist.get_world_size()} ranks")


def ep_moe_forward(x: Tensor, params: dict[str, Tensor], placement: ExpertPlacement, cfg: MoEConfig, *,
                   grouped: bool = False) -> Tensor:
    """x (..., H): this rank's tokens (any number, 0 included) -> (..., H), equal to the dense
    single-process MoE on the same tokens. grouped: the local experts through the Triton grouped
    GEMM (else the per-expert loop). Every rank of the EP group must call it (collectives)."""
    check_params(params, placement, cfg)
    # BEGIN SOLUTION
    flat = x.reshape(-1, x.shape[-1])
    weights, experts = route(flat, params["router.weight"], params["router.bias"], cfg)
    rows, handle = dispatch(flat, assign_replicas(experts, placement), placement)
    run = experts_grouped if grouped else experts_loop
    y = run(rows, handle.recv_slots, params["experts.gate"], params["experts.up"], params["experts.down"])
    out = combine(y, handle, weights)
    if "shared.gate" in params:
        out = out + swiglu(flat, params["shared.gate"], params["shared.up"], params["shared.down"])
    return out.reshape(x.shape)
    # END SOLUTION
