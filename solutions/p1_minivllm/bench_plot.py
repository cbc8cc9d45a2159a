"""The picture of a benchmark run: throughput against the HF baseline, and each request's latency.

`bench.py --plot PATH` draws it, and the GPU perf test attaches the same figure to its result
(`perf.attach`). Three panels: output tokens/s of minivllm and of HF generate; the distribution
(empirical CDF) of time to first token; the distribution of time per output token. Every request
arrives at t = 0, so TTFT spreads with each request's place in the queue, while TPOT shows how fast
a running request decodes as the batch around it grows and shrinks.

Plain data in, a matplotlib Figure out: no torch and no engine here, so the judge can draw it.
"""

from __future__ import annotations

import platform
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

ENGINE_COLOR, HF_COLOR, VLLM_COLOR = "#1f77b4", "#999999", "#ff7f0e"


@dataclass(frozen=True)
class BenchRun:
    """What one benchmark run measured; seconds throughout (the figure shows milliseconds)."""

    hardware: str                  # e.g. "NVIDIA H200" or "AMD EPYC 7B13, 1 thread"
    settings: str                  # model, dtype, workload: the figure's second title line
    engine_tok_s: float            # output tokens / s of minivllm
    ttft_s: list[float]            # one per request
    tpot_s: list[float] = field(default_factory=list)  # one per request with 2+ output tokens
    hf_tok_s: float | None = None  # the HF generate baseline (None: not run)
    hf_label: str = "HF generate"  # e.g. "HF generate (static batches of 32)"
    vllm_tok_s: float | None = None  # vLLM's offline engine on the same workload (None: not run)

    def __post_init__(self) -> None:
        if not self.engine_tok_s > 0 or any(v is not None and not v > 0 for v in (self.hf_tok_s, self.vllm_tok_s)):
            raise ValueError(f"BenchRun: throughputs must be > 0 (engine {self.engine_tok_s}, HF {self.hf_tok_s}, "
                             f"vLLM {self.vllm_tok_s})")
        if not self.ttft_s or min(self.ttft_s) < 0 or (self.tpot_s and min(self.tpot_s) < 0):
            raise ValueError("BenchRun: needs a TTFT for each request, and no negative latency")


def latencies(outputs: Iterable[Any]) -> tuple[list[float], list[float]]:
    """(TTFT of each request, TPOT of each request that has one) from `LLM.generate`'s outputs."""
    ttft, tpot = [], []
    for out in outputs:
        ttft.append(float(out.metrics.ttft))
        if (t := out.tpot()) is not None:
            tpot.append(float(t))
    return ttft, tpot


def percentile(values: Sequence[float], q: float) -> float:
    """The nearest-rank q-quantile (q in [0, 1]) of `values`."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * (len(ordered) - 1) + 0.5))]


def hardware_name(device: str) -> str:
    """The GPU's name on "cuda", else the CPU's model name."""
    if device == "cuda":
        import torch

        return torch.cuda.get_device_name()
    try:
        with open("/proc/cpuinfo") as f:
            names = [line.split(":", 1)[1].strip() for line in f if line.startswith("model name")]
    except OSError:
        names = []
    return names[0] if names else platform.processor() or platform.machine() or "CPU"


def figure(run: BenchRun) -> Any:
    """The three-panel Figure of `run` (a matplotlib Figure; no pyplot state, so nothing to close)."""
    from matplotlib.figure import Figure  # here, not at import: bench.py without --plot never needs it

    fig = Figure(figsize=(13.5, 4.6), layout="constrained")
    ax_tput, ax_ttft, ax_tpot = fig.subplots(1, 3, gridspec_kw={"width_ratios": [1, 1.2, 1.2]})
    _throughput(ax_tput, run)
    _cdf(ax_ttft, [t * 1e3 for t in run.ttft_s], "time to first token (ms)",
         f"TTFT of {len(run.ttft_s)} requests (all arrive at t = 0)")
    _cdf(ax_tpot, [t * 1e3 for t in run.tpot_s], "time per output token (ms)",
         f"TPOT of {len(run.tpot_s)} requests (after the first token)")
    baseline = f" vs {run.hf_label}" if run.hf_tok_s is not None else ""
    fig.suptitle(f"minivllm{baseline} — {run.hardware}\n{run.settings}", fontsize=11)
    return fig


def save(run: BenchRun, path: str) -> None:
    figure(run).savefig(path, dpi=110)


def _throughput(ax: Any, run: BenchRun) -> None:
    bars = [("minivllm", run.engine_tok_s, ENGINE_COLOR)]
    if run.vllm_tok_s is not None:
        bars.append(("vLLM", run.vllm_tok_s, VLLM_COLOR))
    if run.hf_tok_s is not None:
        bars.append((run.hf_label.replace(" (", "\n("), run.hf_tok_s, HF_COLOR))
    labels, values, colors = zip(*reversed(bars), strict=True)  # minivllm on top
    ax.barh(labels, values, color=colors)
    for y, value in enumerate(values):
        ax.text(value, y, f" {value:,.0f} tok/s", va="center", fontsize=9)
    ax.set_xlim(0, max(values) * 1.45)  # room for the value labels
    ax.set_xlabel("output tokens / s")
    ratios = [f"{run.engine_tok_s / v:.1f}x {who}" for who, v in (("HF", run.hf_tok_s), ("vLLM", run.vllm_tok_s)) if v]
    speedup = f": {', '.join(ratios)}" if ratios else ""
    ax.set_title(f"throughput{speedup}", fontsize=10)
    ax.grid(axis="x", alpha=0.3)


def _cdf(ax: Any, values_ms: list[float], xlabel: str, title: str) -> None:
    """The empirical CDF of `values_ms`, with its p50 and p99 marked."""
    ax.set_title(title, fontsize=10)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("fraction of requests")
    ax.grid(alpha=0.3)
    if not values_ms:
        ax.text(0.5, 0.5, "no request produced 2 or more tokens", ha="center", transform=ax.transAxes)
        return
    ordered = sorted(values_ms)
    fractions = [(i + 1) / len(ordered) for i in range(len(ordered))]
    ax.step(ordered, fractions, where="post", color=ENGINE_COLOR, marker=".", markersize=4)
    for q, style in ((0.5, "--"), (0.99, ":")):
        x = percentile(ordered, q)
        ax.axvline(x, color="black", linestyle=style, linewidth=1, label=f"p{q * 100:.0f} {_ms(x)}")
    ax.set_ylim(0, 1.02)
    # The spread is the point, so no axis from 0 (which would flatten it); but a spread under a tenth
    # of the values is shown as that tenth, not blown up to the panel's width.
    mid, span = (ordered[0] + ordered[-1]) / 2, max(ordered[-1] - ordered[0], 0.1 * ordered[-1])
    ax.set_xlim(max(0.0, mid - 0.58 * span), mid + 0.58 * span)
    ax.legend(loc="lower right", fontsize=9)


def _ms(x: float) -> str:
    return f"{x:.0f} ms" if x >= 10 else f"{x:.2f} ms"
