"""Typed descriptions of a device (what the hardware can do) and of a model (what decode must read)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True)
class DeviceSpec:
    """Datasheet ceilings of one accelerator.

    peak_flops maps a compute dtype name ("fp32", "tf32", "bf16", "fp16", "fp8", ...) to the dense
    (no structured sparsity) peak in FLOP/s. mem_bw is the main-memory (HBM) bandwidth in bytes/s.
    """

    name: str
    peak_flops: Mapping[str, float] = field(default_factory=dict)
    mem_bw: float = 0.0

    def __post_init__(self) -> None:
        if not self.peak_flops:
            raise ValueError(f"DeviceSpec {self.name!r}: peak_flops must name at least one dtype")
        for dtype, flops in self.peak_flops.items():
            if not flops > 0:
                raise ValueError(f"DeviceSpec {self.name!r}: peak_flops[{dtype!r}] must be > 0, got {flops}")
        if not self.mem_bw > 0:
            raise ValueError(f"DeviceSpec {self.name!r}: mem_bw must be > 0 bytes/s, got {self.mem_bw}")

    def peak(self, dtype: str) -> float:
        """Dense peak FLOP/s for `dtype`; ValueError if the datasheet gives none."""
        if dtype not in self.peak_flops:
            known = ", ".join(sorted(self.peak_flops))
            raise ValueError(f"DeviceSpec {self.name!r} has no peak for dtype {dtype!r} (known: {known})")
        return self.peak_flops[dtype]


# NVIDIA H100 SXM5 datasheet, dense tensor-core peaks. H200 has the same compute and faster HBM3e.
_HOPPER_PEAKS = {"fp32": 67e12, "tf32": 494.7e12, "bf16": 989e12, "fp16": 989e12, "fp8": 1979e12}
H100_SXM = DeviceSpec("H100 SXM", dict(_HOPPER_PEAKS), mem_bw=3.35e12)
H200 = DeviceSpec("H200", dict(_HOPPER_PEAKS), mem_bw=4.8e12)


@dataclass(frozen=True)
class ModelSpec:
    """What one decode step of a decoder-only transformer must touch.

    n_params: total parameter count, embeddings included, a tied table counted once (what
        `sum(p.numel() for p in model.parameters())` gives for an HF model).
    hidden: model width; with the usual n_heads * head_dim == hidden it sets the attention FLOPs.
    n_kv_heads, head_dim: shape of the K and V caches of one layer (GQA: n_kv_heads < n_heads).
    vocab_size: rows of the input embedding table and of the LM head (each vocab_size x hidden).
    dtype_bytes: bytes per weight (2 for bf16, 1 for fp8, 0.5 for int4).
    kv_dtype_bytes: bytes per cached K or V element; None means the same as dtype_bytes.
    tied_embeddings: True when the LM head reuses the input embedding table (one shared tensor).
    """

    name: str
    n_layers: int
    hidden: int
    n_kv_heads: int
    head_dim: int
    n_params: float
    vocab_size: int
    dtype_bytes: float = 2.0
    kv_dtype_bytes: float | None = None
    tied_embeddings: bool = False

    def __post_init__(self) -> None:
        for attr in ("n_layers", "hidden", "n_kv_heads", "head_dim", "vocab_size"):
            value = getattr(self, attr)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"ModelSpec {self.name!r}: {attr} must be a positive int, got {value!r}")
        tables = (1 if self.tied_embeddings else 2) * self.vocab_size * self.hidden
        if not self.n_params > tables:
            raise ValueError(f"ModelSpec {self.name!r}: n_params must exceed the embedding table(s) "
                             f"({tables} parameters), got {self.n_params}")
        if not self.dtype_bytes > 0:
            raise ValueError(f"ModelSpec {self.name!r}: dtype_bytes must be > 0, got {self.dtype_bytes}")
        if self.kv_dtype_bytes is not None and not self.kv_dtype_bytes > 0:
            raise ValueError(
                f"ModelSpec {self.name!r}: kv_dtype_bytes must be > 0, got {self.kv_dtype_bytes}"
            )

    @property
    def kv_bytes(self) -> float:
        """Bytes of one cached K (or V) element."""
        return self.dtype_bytes if self.kv_dtype_bytes is None else self.kv_dtype_bytes
