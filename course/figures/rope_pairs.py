"""Figure: which dimensions RoPE rotates together, rotate-half (HF/LLaMA) vs interleaved, and the
angle each pair turns per position.

Source: the s01 reference (solutions/s01_transformer/transformer/rope.py). The rotate-half
partners are read off `apply_rope` itself (rotate basis vector e_i; the other non-zero output
is its partner); the angles are atan2(sin, cos) of `rope_cos_sin` at position 1. The interleaved
pairing (2i, 2i + 1) of the RoFormer paper is not implemented in the course, so it is drawn from
its definition. head_dim 64, theta 10000 (LLaMA-2's rope_theta). Belongs in
course/stages/01-transformer.md, at the RoPE rows of "Key formulas" and the "Interleaved vs
rotate-half RoPE" pitfall.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from course.figures._common import pyplot, reference, save

HEAD_DIM = 64
THETA = 10000.0


def _partners_from_apply_rope(tf, head_dim: int, theta: float) -> list[int]:
    """partner[i]: the other dimension a unit vector along i is rotated into, at position 1."""
    cos, sin = tf.rope_cos_sin(torch.ones(1, 1, dtype=torch.long), head_dim, theta)
    basis = torch.eye(head_dim, dtype=torch.float64)[None, :, None, :]  # (1, D, 1, D): D "heads"
    out = tf.apply_rope(basis, cos.double(), sin.double())[0, :, 0, :]  # (D, D)
    partners = []
    for i in range(head_dim):
        others = [j for j in range(head_dim) if j != i and abs(float(out[i, j])) > 1e-12]
        partners.append(others[0] if others else i)
    return partners


def data(head_dim: int = HEAD_DIM, theta: float = THETA) -> dict:
    """Partners under both conventions and the per-position angle (radians) of each dimension."""
    tf = reference("s01_transformer", "transformer")
    cos, sin = tf.rope_cos_sin(torch.ones(1, 1, dtype=torch.long), head_dim, theta)
    dim_angle = torch.atan2(sin[0, 0].double(), cos[0, 0].double()).numpy()  # angle of each dim
    pair_angle = dim_angle[: head_dim // 2]  # rotate-half lays out [angles, angles]
    return {
        "head_dim": head_dim,
        "theta": theta,
        "rotate_half_partner": _partners_from_apply_rope(tf, head_dim, theta),
        "interleaved_partner": [i ^ 1 for i in range(head_dim)],
        "dim_angle": dim_angle.tolist(),
        "pair_angle": pair_angle.tolist(),  # pair i (i < head_dim / 2) turns this much per position
    }


def _arcs(ax, partners: list[int], pair_of, colors, title: str) -> None:
    d = len(partners)
    for i, j in enumerate(partners):
        if j <= i:
            continue
        mid, half = (i + j) / 2, (j - i) / 2
        t = np.linspace(0, np.pi, 40)
        ax.plot(mid + half * np.cos(t), 0.9 + 0.12 * half * np.sin(t), color=colors[pair_of(i)], lw=1.2)
    for i in range(d):
        ax.add_patch(pyplot().Rectangle((i - 0.5, 0), 1, 0.9, facecolor=colors[pair_of(i)], edgecolor="w"))
        if i % 8 == 0 or i == d - 1:
            ax.text(i, -0.5, str(i), ha="center", va="top", fontsize=7)
    ax.set_xlim(-1, d)
    span = max(abs(j - i) for i, j in enumerate(partners)) / 2
    ax.set_ylim(-1.6, 0.9 + 0.12 * span + 0.3)
    ax.axis("off")
    ax.set_title(title, fontsize=9, loc="left")


def _wavelength(x):
    """angle per position <-> wavelength in positions (the map is its own inverse)."""
    return 2 * np.pi / np.maximum(x, 1e-30)


def draw(d: dict, path: str | Path) -> Path:
    plt = pyplot()
    n_pairs = d["head_dim"] // 2
    colors = plt.get_cmap("viridis")(np.linspace(0, 1, n_pairs))
    fig, axes = plt.subplots(3, 1, figsize=(9.5, 6.4), height_ratios=[1.5, 0.5, 1.3])
    _arcs(axes[0], d["rotate_half_partner"], lambda i: i % n_pairs, colors,
          "rotate-half (HF / LLaMA checkpoints): dim i rotates with dim i + D/2   [from apply_rope]")
    _arcs(axes[1], d["interleaved_partner"], lambda i: i // 2, colors,
          "interleaved (RoFormer paper, Meta's original code): dim 2i rotates with dim 2i + 1")
    ax = axes[2]
    ax.semilogy(range(n_pairs), d["pair_angle"], "o", color="k", ms=3)
    ax.scatter(range(n_pairs), d["pair_angle"], c=colors, s=18, zorder=3)
    ax.set(xlabel="pair index i (colour as above)", ylabel="angle per position (rad)",
           title=f"theta_i = {d['theta']:.0f}^(-2i/D), D = {d['head_dim']}   [from rope_cos_sin at position 1]")
    ax.title.set_fontsize(9)
    ax.grid(alpha=0.3, which="both")
    sec = ax.secondary_yaxis("right", functions=(_wavelength, _wavelength))
    sec.set_ylabel("wavelength (positions)")
    fig.suptitle("RoPE: which dimensions rotate together, and how fast", fontsize=11)
    fig.tight_layout()
    return save(fig, path)


if __name__ == "__main__":
    from course.figures._common import PNG_DIR

    print(draw(data(), PNG_DIR / "rope_pairs.png"))
