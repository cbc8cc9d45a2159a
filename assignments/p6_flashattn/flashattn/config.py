"""Shapes and tile configurations of the attention kernels (given code: nothing to fill in).

Fixed-length layout: q (B, H, N_q, d), k and v (B, H_kv, N_k, d) with H a multiple of H_kv
(grouped-query attention: query head h reads key/value head h // (H // H_kv)); o like q; lse
(B, H, N_q) fp32. Packed (varlen) layout: q (total_q, H, d), k and v (total_k, H_kv, d), sequence b
in rows cu_seqlens[b]:cu_seqlens[b + 1]; o like q; lse (H, total_q) fp32.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

HEAD_DIMS = (16, 32, 64, 128)
DTYPES = (torch.float16, torch.bfloat16, torch.float32)


def _is_pow2(x: int) -> bool:
    return x > 0 and x & (x - 1) == 0


@dataclass(frozen=True)
class BlockConfig:
    """Tile sizes and launch parameters of one kernel.

    block_m: query rows per tile; block_n: key rows per tile (powers of two, 16..256).
    num_warps, num_stages: Triton launch options (ignored by the CPU interpreter).
    """

    block_m: int
    block_n: int
    num_warps: int = 4
    num_stages: int = 2

    def __post_init__(self) -> None:
        for name in ("block_m", "block_n"):
            v = getattr(self, name)
            if not (_is_pow2(v) and 16 <= v <= 256):
                raise ValueError(f"{name} must be a power of two in [16, 256], got {v}")
        if self.num_warps not in (1, 2, 4, 8, 16):
            raise ValueError(f"num_warps must be 1, 2, 4, 8 or 16, got {self.num_warps}")
        if self.num_stages < 1:
            raise ValueError(f"num_stages must be >= 1, got {self.num_stages}")


@dataclass(frozen=True)
class AttnShape:
    """Validated problem size of one attention call."""

    batch: int
    heads: int
    kv_heads: int
    seq_len: int
    head_dim: int
    kv_seq_len: int | None = None  # keys per sequence; None: as many as queries

    def __post_init__(self) -> None:
        if self.kv_seq_len is None:
            object.__setattr__(self, "kv_seq_len", self.seq_len)
        if min(self.batch, self.heads, self.kv_heads, self.seq_len, self.kv_seq_len) < 1:
            raise ValueError(f"empty attention problem: {self}")
        if self.heads % self.kv_heads:
            raise ValueError(f"heads ({self.heads}) must be a multiple of kv_heads ({self.kv_heads})")
        if self.head_dim not in HEAD_DIMS:
            raise ValueError(f"head_dim must be one of {HEAD_DIMS}, got {self.head_dim}")

    @property
    def group(self) -> int:
        """Query heads per key/value head."""
        return self.heads // self.kv_heads

    @classmethod
    def of(cls, q: Tensor, k: Tensor, v: Tensor) -> AttnShape:
        """Check q (B, H, N_q, d), k and v (B, H_kv, N_k, d): same dtype, device, B and d."""
        if q.dim() != 4 or k.dim() != 4 or v.dim() != 4:
            raise ValueError("q, k, v must be 4-D (batch, heads, seq_len, head_dim)")
        if k.shape != v.shape:
            raise ValueError(f"k {tuple(k.shape)} and v {tuple(v.shape)} must have the same shape")
        b, h, n, d = q.shape
        if k.shape[0] != b or k.shape[3] != d:
            raise ValueError(f"q {tuple(q.shape)} and k {tuple(k.shape)} disagree on B or d")
        if not (q.dtype == k.dtype == v.dtype) or q.dtype not in DTYPES:
            raise ValueError(f"q, k, v must share one dtype of {DTYPES}; got {q.dtype}, {k.dtype}, "
                             f"{v.dtype}")
        if not (q.device == k.device == v.device):
            raise ValueError("q, k, v must be on the same device")
        return cls(batch=b, heads=h, kv_heads=k.shape[1], seq_len=n, head_dim=d,
                   kv_seq_len=k.shape[2])


def forward_config(head_dim: int, on_gpu: bool, dtype: torch.dtype = torch.bfloat16) -> BlockConfig:
    """Tiles of the forward kernel. The causal loop split needs block_m % block_n == 0.

    GPU choices were measured on an H200 (bf16, B * N = 16k tokens, H * d = 2048, N = 4096);
    fp32 tiles take twice the shared memory, so they are smaller.
    """
    if not on_gpu:  # the interpreter: small tiles so that short test sequences span many
        return BlockConfig(block_m=32, block_n=16)
    if dtype == torch.float32:
        return BlockConfig(block_m=64, block_n=32, num_warps=4, num_stages=2)
    if head_dim <= 64:
        return BlockConfig(block_m=64, block_n=64, num_warps=4, num_stages=3)
    return BlockConfig(block_m=128, block_n=64, num_warps=8, num_stages=3)


def backward_configs(head_dim: int, on_gpu: bool,
                     dtype: torch.dtype = torch.bfloat16) -> tuple[BlockConfig, BlockConfig]:
    """Tiles of the (dK, dV) kernel and of the dQ kernel.

    dK/dV iterates over query tiles under a fixed key tile (needs block_n % block_m == 0);
    dQ iterates over key tiles under a fixed query tile (needs block_m % block_n == 0).
    """
    if not on_gpu:
        return BlockConfig(block_m=16, block_n=32), BlockConfig(block_m=32, block_n=16)
    if dtype == torch.float32:
        return (BlockConfig(block_m=32, block_n=64, num_warps=8, num_stages=2),
                BlockConfig(block_m=64, block_n=32, num_warps=8, num_stages=2))
    if head_dim <= 64:
        return (BlockConfig(block_m=32, block_n=128, num_warps=4, num_stages=3),
                BlockConfig(block_m=128, block_n=64, num_warps=8, num_stages=3))
    return (BlockConfig(block_m=64, block_n=64, num_warps=4, num_stages=2),
            BlockConfig(block_m=64, block_n=64, num_warps=4, num_stages=2))
