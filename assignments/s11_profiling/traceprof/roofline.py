"""A roofline of the GEMMs in a trace, from the shapes the profiler recorded.

With record_shapes=True each aten operator carries args["Input Dims"] and args["Input type"]. A GEMM
operator's kernels (the GEMM and, when cuBLAS splits K, its reduction) run inside it; their summed
GPU time is the operator's time.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .events import Event
from .launches import enclosing_op, join_launches

GEMM_OPS = ("aten::mm", "aten::addmm", "aten::bmm")
DTYPE_BYTES = {"float": 4, "double": 8, "c10::Half": 2, "c10::BFloat16": 2, "c10::Float8_e4m3fn": 1}


@dataclass(frozen=True)
class GemmOp:
    """One GEMM operator: (batch x) M x K times K x N; dtype_bytes of the operands; kernel_us: the summed
    duration of the GPU events its calls enqueued; bias_numel: the addmm bias's elements (else 0)."""

    name: str
    batch: int
    m: int
    n: int
    k: int
    dtype_bytes: int
    kernel_us: float
    bias_numel: int = 0

    @property
    def flops(self) -> int:
        """2 * batch * M * N * K (a multiply and an add per term; the bias add is not counted)."""
        raise NotImplementedError("s11.13: GemmOp.flops")

    @property
    def bytes(self) -> int:
        """Each input read once and the output written once: dtype_bytes * (batch * (M*K + K*N + M*N)
        + bias_numel)."""
        raise NotImplementedError("s11.14: GemmOp.bytes")


@dataclass(frozen=True)
class RooflinePoint:
    """intensity: FLOP per byte; achieved: FLOP/s over the kernel time; attainable: min(peak FLOP/s,
    intensity * peak bandwidth); bound: "memory" when intensity is below the ridge (peak FLOP/s /
    peak bandwidth), else "compute"."""

    op: GemmOp
    intensity: float
    achieved_flops_per_s: float
    attainable_flops_per_s: float
    bound: str

    @property
    def fraction_of_roof(self) -> float:
        return self.achieved_flops_per_s / self.attainable_flops_per_s


def gemm_ops(events: list[Event]) -> list[GemmOp]:
    """One GemmOp per GEMM operator event (GEMM_OPS) that enqueued GPU work, in the order of the
    operators' start. Shapes: mm [[M, K], [K, N]]; addmm [bias, [M, K], [K, N]]; bmm [[B, M, K], [B, K, N]];
    dtype from the first matrix operand's "Input type" (DTYPE_BYTES). Raises ValueError naming the
    operator when its shapes are missing (a trace recorded without record_shapes=True)."""
    raise NotImplementedError("s11.15: gemm_ops")


def roofline(events: list[Event], peak_flops_per_s: float, peak_bytes_per_s: float) -> list[RooflinePoint]:
    """A RooflinePoint for each of gemm_ops(events), same order."""
    raise NotImplementedError("s11.16: roofline")


def plot_roofline(points: list[RooflinePoint], peak_flops_per_s: float, peak_bytes_per_s: float,
                  path: str | Path, title: str = "") -> Path:
    """Draw the roofline (log-log: FLOP/byte against FLOP/s, the memory slope and the compute roof)
    with one marker per point, and save it as a PNG at `path`; returns the path."""
    raise NotImplementedError("s11.17: plot_roofline")
