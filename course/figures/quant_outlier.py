"""Figure: one outlier channel stretches a shared int8 grid; per-token scales help only partly
(every token carries the outlier), SmoothQuant moves the range into the weights.

Source: the s08 reference (solutions/s08_quant/quant): `compute_qparams` / `fake_quant` at
per-tensor and per-token ("channel" granularity on x's rows) int8, `smooth_scales` and
`apply_smoothing` at alpha = 0.5, on seeded activations (TOKENS x K, N(0, 1)) with one channel
OUTLIER times larger and a flat weight. Belongs in course/stages/08-quantization.md ("What the
measurements show").
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from course.figures._common import pyplot, reference, save

TOKENS, K, N_OUT, OUTLIER_CHANNEL, OUTLIER, SEED, ALPHA = 64, 16, 16, 5, 40.0, 0, 0.5
COLOURS = {"int8 per tensor": "#d62728", "int8 per token": "#ff7f0e", "SmoothQuant, then int8 per tensor": "#2ca02c"}


def tensors() -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(SEED)
    x = torch.randn(TOKENS, K, generator=g, dtype=torch.float64)
    x[:, OUTLIER_CHANNEL] *= OUTLIER
    w = torch.randn(N_OUT, K, generator=g, dtype=torch.float64) / K**0.5
    return x, w


def _channel_error(x: torch.Tensor, x_hat: torch.Tensor) -> list[float]:
    """RMS error of each channel relative to that channel's RMS."""
    return ((x_hat - x).pow(2).mean(0).sqrt() / x.pow(2).mean(0).sqrt()).tolist()


def data() -> dict:
    q = reference("s08_quant", "quant")
    x, w = tensors()
    per_tensor = q.IntQuantConfig(bits=8, symmetric=True, granularity="tensor")
    per_token = q.IntQuantConfig(bits=8, symmetric=True, granularity="channel")
    s = q.smooth_scales(x, w, ALPHA)
    xs, ws = q.apply_smoothing(x, w, s)
    xs_hat = q.fake_quant(xs, per_tensor)
    y = x @ w.T
    schemes = {"int8 per tensor": (q.fake_quant(x, per_tensor), q.fake_quant(w, per_tensor)),
               "int8 per token": (q.fake_quant(x, per_token), q.fake_quant(w, per_tensor)),
               "SmoothQuant, then int8 per tensor": (xs_hat * s, q.fake_quant(ws, per_tensor) / s)}
    return {
        "x": x.numpy(), "smoothed": xs.numpy(), "s": s.numpy(),
        "step": float(q.compute_qparams(x, per_tensor)[0].reshape(-1)[0]),
        "step_smoothed": float(q.compute_qparams(xs, per_tensor)[0].reshape(-1)[0]),
        "channel_error": {name: _channel_error(x, xh) for name, (xh, _) in schemes.items()},
        "output_error": {name: float((xh @ wh.T - y).norm() / y.norm()) for name, (xh, wh) in schemes.items()},
    }


def _grid_panel(ax, values: np.ndarray, step: float, title: str) -> None:
    lim = 4.0
    for level in np.arange(-np.floor(lim / step), np.floor(lim / step) + 1) * step:
        ax.axhline(level, color="#bbbbbb", lw=0.6 if step > 0.2 else 0.25, zorder=0)
    cols = np.tile(np.arange(values.shape[1]), (values.shape[0], 1))
    ax.scatter(cols.ravel(), values.ravel(), s=4, color="#1f77b4", zorder=1)
    ax.set_ylim(-lim, lim)
    ax.set_xticks(range(values.shape[1]))
    ax.tick_params(axis="x", labelsize=6)
    ax.set_xlabel("channel")
    ax.set_title(title, fontsize=8.5, loc="left")


def draw(d: dict, path: str | Path) -> Path:
    plt = pyplot()
    fig, axes = plt.subplots(1, 3, figsize=(11, 3.6), gridspec_kw={"width_ratios": [1, 1, 1.15]})
    c = OUTLIER_CHANNEL
    amax = float(np.abs(d["x"][:, c]).max())
    _grid_panel(axes[0], d["x"], d["step"], f"activations; grey: int8 levels, step {d['step']:.2f}\n"
                f"(amax {amax:.0f} is in channel {c}: off this scale)")
    _grid_panel(axes[1], d["smoothed"], d["step_smoothed"], f"x / s (SmoothQuant, alpha = {ALPHA}): "
                f"step {d['step_smoothed']:.3f}\n(s moves the range into w * s)")
    axes[0].set_ylabel("value")
    ax = axes[2]
    width = 0.28
    for i, (name, err) in enumerate(d["channel_error"].items()):
        ax.bar(np.arange(K) + (i - 1) * width, np.array(err) * 100, width,
               label=f"{name}: output error {d['output_error'][name]:.1%}", color=COLOURS[name])
    ax.set_yscale("log")
    ax.set_ylim(1e-3, 1e4)  # room for the legend above the bars
    ax.set_xticks(range(K))
    ax.tick_params(axis="x", labelsize=6)
    ax.set_xlabel("channel")
    ax.set_ylabel("RMS error / RMS value (%)")
    ax.set_title("per-channel error of x; y = x w^T error in the legend", fontsize=8.5, loc="left")
    ax.legend(fontsize=6.5, loc="upper right")
    fig.suptitle(f"{TOKENS} tokens x {K} channels of N(0, 1), channel {c} scaled x{OUTLIER:.0f}: one shared int8 "
                 "scale leaves the other channels a few levels [s08 intquant, smoothquant]", fontsize=9.5,
                 x=0.01, ha="left")
    fig.tight_layout()
    return save(fig, path)


if __name__ == "__main__":
    from course.figures._common import PNG_DIR

    print(draw(data(), PNG_DIR / "quant_outlier.png"))
