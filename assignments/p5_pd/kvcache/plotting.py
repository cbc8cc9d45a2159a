"""Draw a comparison of simulated runs: KV utilisation over time and the TTFT / TPOT CDFs (given).

matplotlib is imported inside the function, with the Agg backend, so the rest of the package
works where matplotlib is missing and nothing needs a display.
"""

from __future__ import annotations

import io
from collections.abc import Mapping
from pathlib import Path

from .simulator import SimResult

Runs = Mapping[str, SimResult]


def _cdf(values: list[float]) -> tuple[list[float], list[float]]:
    xs = sorted(values)
    return xs, [(i + 1) / len(xs) for i in range(len(xs))]


def _draw_row(axes, runs: Runs, label: str) -> None:
    ax_kv, ax_ttft, ax_tpot = axes
    for name, res in runs.items():
        steps = res.steps[:: max(1, len(res.steps) // 1500)]  # thin long runs: the PNG stays small
        t = [s.start_s for s in steps]
        util = [100.0 * s.kv_blocks_used / res.num_blocks for s in steps]
        ax_kv.step(t, util, where="post", label=name, linewidth=0.8)
        ax_ttft.plot(*_cdf([r.ttft_s * 1e3 for r in res.requests]), label=name)
        tpot = [r.tpot_s * 1e3 for r in res.requests if r.tpot_s is not None]
        if tpot:
            ax_tpot.plot(*_cdf(tpot), label=name)
    prefix = f"{label}: " if label else ""
    ax_kv.set(xlabel="time (s)", ylabel="KV blocks in use (%)", title=f"{prefix}KV utilisation", ylim=(0, 105))
    ax_ttft.set(xlabel="TTFT (ms)", ylabel="fraction of requests", title=f"{prefix}TTFT CDF", xscale="log")
    ax_tpot.set(xlabel="TPOT (ms)", ylabel="fraction of requests", title=f"{prefix}TPOT CDF", xscale="log")
    for ax in axes:
        ax.grid(alpha=0.3)
    ax_kv.legend(fontsize=8)


def plot_comparison(results: Runs | Mapping[str, Runs], path: str | Path, *, title: str = "") -> Path:
    """Write a PNG (palette colours, small enough to commit): per row, KV blocks in use (% of the pool) against time, the CDF of TTFT and
    the CDF of TPOT (ms), one line per run. results maps run names to SimResults (one row), or
    trace names to such mappings (one row per trace)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = {"": results} if all(isinstance(v, SimResult) for v in results.values()) else dict(results)
    fig, axes = plt.subplots(len(rows), 3, figsize=(13, 3.4 * len(rows)), dpi=80, squeeze=False)
    for row_axes, (label, runs) in zip(axes, rows.items()):
        _draw_row(row_axes, runs, label)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    out = Path(path)
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    plt.close(fig)
    try:  # a palette PNG is a third of the size of the RGBA one and looks the same for line plots
        from PIL import Image  # a dependency of matplotlib
    except ImportError:
        out.write_bytes(buf.getvalue())
        return out
    Image.open(buf).convert("RGB").quantize(colors=128).save(out, format="PNG", optimize=True)
    return out
