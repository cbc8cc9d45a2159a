"""Where each sequence's rows live, for the kernels whose sequences have lengths of their own
(given code: nothing to fill in).

Two callers share those kernels: a fixed-length batch whose query and key lengths differ
(q (B, H, N_q, d), k (B, H_kv, N_k, d)) and a packed variable-length batch (q (total_q, H, d),
k (total_k, H_kv, d), sequence b in rows cu_seqlens[b]:cu_seqlens[b + 1]). Both are the same
problem once every tensor is described by element strides: row i of head h of sequence b sits at

    base + b * stride_b + h * stride_h + (start_b + i) * stride_row      (d contiguous)

with start_b = 0 and stride_b = one sequence's size in a fixed-length batch, and start_b =
cu_seqlens[b], stride_b = 0 in a packed one. lse and the backward's D use (b, h) strides and a row
stride of 1.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from flashattn.config import DTYPES, HEAD_DIMS


@dataclass(frozen=True)
class RaggedLayout:
    """Sizes and element strides of one attention call in the kernels' terms.

    Tensors must be contiguous. cu_q, cu_k: int32 (B + 1,) on q's device in a packed batch, else
    None (then every sequence has max_len_q queries and max_len_k keys).
    """

    batch: int
    heads: int
    kv_heads: int
    head_dim: int
    max_len_q: int
    max_len_k: int
    q_strides: tuple[int, int, int]  # (batch, head, row) of q, o, dq, do
    k_strides: tuple[int, int, int]  # (batch, head, row) of k, v, dk, dv
    lse_strides: tuple[int, int]  # (batch, head) of lse and D; rows are contiguous
    cu_q: Tensor | None = None
    cu_k: Tensor | None = None

    @property
    def group(self) -> int:
        """Query heads per key/value head."""
        return self.heads // self.kv_heads

    @property
    def varlen(self) -> bool:
        return self.cu_q is not None

    def lse_shape(self, total_q: int) -> tuple[int, ...]:
        """(B, H, N_q) for a fixed-length batch, (H, total_q) for a packed one."""
        if self.varlen:
            return (self.heads, total_q)
        return (self.batch, self.heads, self.max_len_q)

    def seq_args(self, device: torch.device) -> tuple[Tensor, Tensor]:
        """(cu_q, cu_k) for the kernels; a fixed-length batch passes placeholders never read."""
        if self.varlen:
            return self.cu_q, self.cu_k
        dummy = torch.empty(1, dtype=torch.int32, device=device)
        return dummy, dummy

    @classmethod
    def fixed(cls, q: Tensor, k: Tensor) -> RaggedLayout:
        """q (B, H, N_q, d), k (B, H_kv, N_k, d), both contiguous (checked by AttnShape.of)."""
        b, h, n_q, d = q.shape
        h_kv, n_k = k.shape[1], k.shape[2]
        return cls(batch=b, heads=h, kv_heads=h_kv, head_dim=d, max_len_q=n_q, max_len_k=n_k,
                   q_strides=(h * n_q * d, n_q * d, d), k_strides=(h_kv * n_k * d, n_k * d, d),
                   lse_strides=(h * n_q, n_q))

    @classmethod
    def packed(cls, q: Tensor, k: Tensor, v: Tensor, cu_q: Tensor, cu_k: Tensor,
               max_len_q: int, max_len_k: int) -> RaggedLayout:
        """Check a packed batch: q (total_q, H, d), k and v (total_k, H_kv, d), cu_seqlens int32
        (B + 1,) with B >= 1, max_seqlen >= 0. The values of cu_seqlens are not read here (that
        would wait for the GPU): they must start at 0, never decrease, end at total, and no
        sequence may be longer than max_seqlen."""
        if q.dim() != 3 or k.dim() != 3 or k.shape != v.shape:
            raise ValueError(f"q (total_q, H, d), k and v (total_k, H_kv, d) expected, got "
                             f"{tuple(q.shape)}, {tuple(k.shape)}, {tuple(v.shape)}")
        total_q, h, d = q.shape
        h_kv = k.shape[1]
        if k.shape[2] != d or d not in HEAD_DIMS:
            raise ValueError(f"head_dim must agree and be one of {HEAD_DIMS}: q {d}, k {k.shape[2]}")
        if h_kv < 1 or h % h_kv:
            raise ValueError(f"heads ({h}) must be a multiple of kv_heads ({h_kv})")
        if not (q.dtype == k.dtype == v.dtype) or q.dtype not in DTYPES:
            raise ValueError(f"q, k, v must share one dtype of {DTYPES}")
        for name, cu in (("cu_seqlens_q", cu_q), ("cu_seqlens_k", cu_k)):
            if cu.dim() != 1 or cu.dtype != torch.int32 or cu.numel() < 2:
                raise ValueError(f"{name} must be int32 of shape (batch + 1,), got {cu.dtype} "
                                 f"{tuple(cu.shape)}")
            if cu.device != q.device:
                raise ValueError(f"{name} must be on q's device ({q.device}), got {cu.device}")
        if cu_q.numel() != cu_k.numel():
            raise ValueError(f"cu_seqlens_q and cu_seqlens_k describe {cu_q.numel() - 1} and "
                             f"{cu_k.numel() - 1} sequences")
        if not (q.device == k.device == v.device):
            raise ValueError("q, k, v must be on the same device")
        if min(max_len_q, max_len_k) < 0:
            raise ValueError(f"max_seqlen must be >= 0, got {max_len_q}, {max_len_k}")
        return cls(batch=cu_q.numel() - 1, heads=h, kv_heads=h_kv, head_dim=d,
                   max_len_q=int(max_len_q), max_len_k=int(max_len_k),
                   q_strides=(0, d, h * d), k_strides=(0, d, h_kv * d),
                   lse_strides=(0, total_q), cu_q=cu_q, cu_k=cu_k)
