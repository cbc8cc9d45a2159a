"""The SwiGLU feed-forward block."""

from __future__ import annotations

import torch.nn.functional as F
from torch import Tensor, nn

from transformer.config import LlamaConfig


class MLP(nn.Module):
    """SwiGLU MLP (HF keys: `mlp.{gate,up,down}_proj.weight`)."""

    def __init__(self, config: LlamaConfig) -> None:
        super().__init__()
        d, f = config.hidden_size, config.intermediate_size
        self.gate_proj = nn.Linear(d, f, bias=False)
        self.up_proj = nn.Linear(d, f, bias=False)
        self.down_proj = nn.Linear(f, d, bias=False)

    def forward(self, x: Tensor) -> Tensor:
        """down_proj(silu(gate_proj(x)) * up_proj(x)); x: (..., hidden) -> (..., hidden)."""
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))
