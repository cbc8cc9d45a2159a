"""The MoE layer's settings (DeepSeek-V3's gate and expert shapes) and the block's attention heads."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class MoEConfig:
    """hidden: H; num_experts: E logical routed experts; top_k experts a token; n_group groups of
    experts of which topk_group are eligible (DeepSeek-V3: 256, 8, 8, 4); routed_scaling_factor
    multiplies the chosen weights (2.5); norm_topk_prob renormalises them first; num_heads: the
    block's attention heads (dp_attention only)."""

    hidden: int
    num_experts: int
    top_k: int
    n_group: int = 1
    topk_group: int = 1
    routed_scaling_factor: float = 1.0
    norm_topk_prob: bool = True
    num_heads: int = 1
    rms_eps: float = 1e-6

    def __post_init__(self) -> None:
        if self.hidden < 1 or self.num_heads < 1 or self.hidden % self.num_heads:
            raise ValueError(f"hidden {self.hidden} must be >= 1 and split over {self.num_heads} heads")
        if self.n_group < 1 or self.num_experts % self.n_group:
            raise ValueError(f"{self.num_experts} experts do not split into {self.n_group} equal groups")
        if not 1 <= self.topk_group <= self.n_group:
            raise ValueError(f"topk_group {self.topk_group}: must be in 1..n_group ({self.n_group})")
        eligible = self.topk_group * self.num_experts // self.n_group
        if not 1 <= self.top_k <= eligible:
            raise ValueError(f"top_k {self.top_k}: must be in 1..{eligible} (experts in the eligible groups)")

    def gate_kwargs(self) -> dict:
        return {"top_k": self.top_k, "n_group": self.n_group, "topk_group": self.topk_group,
                "routed_scaling_factor": self.routed_scaling_factor, "norm_topk_prob": self.norm_topk_prob}
