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
        # BEGIN SOLUTION
        return 2 * self.batch * self.m * self.n * self.k
        # END SOLUTION

    @property
    def bytes(self) -> int:
        """Each input read once and the output written once: dtype_bytes * (batch * (M*K + K*N + M*N)
        + bias_numel)."""
        # BEGIN SOLUTION
        return self.dtype_bytes * (self.batch * (self.m * self.k + self.k * self.n + self.m * self.n) + self.bias_numel)
        # END SOLUTION


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
    # BEGIN SOLUTION
    time_of: dict[int, float] = {}
    op_of: dict[int, Event] = {}
    for launch in join_launches(events):
        if launch.call is None:
            continue
        op = enclosing_op(events, launch.call)
        if op is not None and op.name in GEMM_OPS:
            time_of[id(op)] = time_of.get(id(op), 0.0) + launch.gpu.dur
            op_of[id(op)] = op
    out = []
    for key, op in sorted(op_of.items(), key=lambda kv: kv[1].ts):
        dims, types = op.args.get("Input Dims"), op.args.get("Input type")
        if not dims or not types:
            raise ValueError(f"{op.name} at ts={op.ts}: no 'Input Dims' (record the trace with record_shapes=True)")
        bias = 0
        if op.name == "aten::addmm":
            bias = 1
            for d in dims[0]:
                bias *= d
            dims, types = dims[1:], types[1:]
        if op.name == "aten::bmm":
            (b, m, k), (_, _, n) = dims[0], dims[1]
        else:
            (m, k), (_, n) = dims[0], dims[1]
            b = 1
        out.append(GemmOp(op.name, b, m, n, k, DTYPE_BYTES[types[0]], time_of[key], bias))
    return out
    # END SOLUTION


def roofline(events: list[Event], peak_flops_per_s: float, peak_bytes_per_s: float) -> list[RooflinePoint]:
    """A RooflinePoint for each of gemm_ops(events), same order."""
    # BEGIN SOLUTION
    ridge = peak_flops_per_s / peak_bytes_per_s
    out = []
    for op in gemm_ops(events):
        ai = op.flops / op.bytes
        out.append(RooflinePoint(op, ai, op.flops / (op.kernel_us * 1e-6),
                                 min(peak_flops_per_s, ai * peak_bytes_per_s),
                                 "memory" if ai < ridge else "compute"))
    return out
    # END SOLUTION


def plot_roofline(points: list[RooflinePoint], peak_flops_per_s: float, peak_bytes_per_s: float,
                  path: str | Path, title: str = "") -> Path:
    """Draw the roofline (log-log: FLOP/byte against FLOP/s, the memory slope and the compute roof)
    with one marker per point, and save it as a PNG at `path`; returns the path."""
    # BEGIN SOLUTION
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ais = [p.intensity for p in points] or [1.0]
    lo, hi = min(ais + [1.0]) / 4, max(ais + [peak_flops_per_s / peak_bytes_per_s]) * 4
    xs = [lo * (hi / lo) ** (i / 100) for i in range(101)]
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.loglog(xs, [min(peak_flops_per_s, x * peak_bytes_per_s) for x in xs], "k-", label="roof")
    for bound, color in (("memory", "tab:blue"), ("compute", "tab:red")):
        sel = [p for p in points if p.bound == bound]
        ax.scatter([p.intensity for p in sel], [p.achieved_flops_per_s for p in sel], c=color, s=12,
                   label=f"{bound}-bound ({len(sel)})")
    ax.set_xlabel("arithmetic intensity (FLOP/byte)")
    ax.set_ylabel("FLOP/s")
    ax.set_title(title)
    ax.legend()
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
    # END SOLUTION
