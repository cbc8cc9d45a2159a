"""Figure: how each RoPE scaling method changes the frequencies of a head of 128 dimensions
(base 10000, trained on 4096 tokens) to run at 4x that context: inv_freq scaled / inv_freq plain
for each of the 64 pairs, against the pair's wavelength in tokens.

Source: the s09 reference's `rope_inv_freq` (solutions/s09_longctx_moe/longmoe/rope_scaling.py)
for linear, dynamic NTK-aware (at 16384 tokens), YaRN (beta 32/1) and Llama-3-style bands (1 and 4)
with factor 4; tests/test_figures.py checks each curve against transformers' ROPE_INIT_FUNCTIONS.
Belongs in course/stages/09-long-context-and-moe.md ("Four ways to stretch RoPE").
"""

from __future__ import annotations

import math
from pathlib import Path

from course.figures._common import pyplot, reference, save

DIM, BASE, TRAIN, FACTOR = 128, 10000.0, 4096, 4.0
METHODS = {
    "linear (position interpolation)": {"rope_type": "linear", "factor": FACTOR},
    "dynamic NTK-aware at 4x": {"rope_type": "dynamic", "factor": 1.0, "original_max_position_embeddings": TRAIN},
    "YaRN (NTK-by-parts)": {"rope_type": "yarn", "factor": FACTOR, "original_max_position_embeddings": TRAIN},
    "Llama 3 bands": {"rope_type": "llama3", "factor": FACTOR, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                      "original_max_position_embeddings": TRAIN},
}
COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728")


def data() -> dict:
    longmoe = reference("s09_longctx_moe", "longmoe")
    plain, _ = longmoe.rope_inv_freq(DIM, BASE, None)
    out = {"wavelength": [2 * math.pi / float(f) for f in plain], "ratio": {}, "attention_factor": {}}
    for name, params in METHODS.items():
        scaled, attention = longmoe.rope_inv_freq(DIM, BASE, params, seq_len=int(FACTOR * TRAIN))
        out["ratio"][name] = [float(s / p) for s, p in zip(scaled, plain)]
        out["attention_factor"][name] = attention
    return out


def draw(d: dict, path: str | Path) -> Path:
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(9, 3.4))
    for (name, ratio), colour in zip(d["ratio"].items(), COLOURS):
        extra = f", attention factor {d['attention_factor'][name]:.3f}" if d["attention_factor"][name] != 1 else ""
        ax.plot(d["wavelength"], ratio, marker=".", ms=3, lw=1.2, color=colour, label=name + extra)
    ax.axvline(TRAIN, color="k", ls="--", lw=0.8)
    ax.text(TRAIN * 1.1, 0.9, f"wavelength = training context ({TRAIN})", fontsize=8)
    ax.set_xscale("log")
    ax.set_xlabel("wavelength 2π / inv_freq of the pair (tokens), log scale")
    ax.set_ylabel("inv_freq scaled / plain")
    ax.set_ylim(0.2, 1.05)
    ax.axhline(1 / FACTOR, color="grey", lw=0.6, ls=":")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="lower left")
    ax.set_title(f"RoPE, d = {DIM}, base {BASE:g}, trained on {TRAIN} tokens, stretched x{FACTOR:g} "
                 "[s09 rope_inv_freq]", fontsize=10, loc="left")
    fig.tight_layout()
    return save(fig, path)


if __name__ == "__main__":
    from course.figures._common import PNG_DIR

    print(draw(data(), PNG_DIR / "rope_scaling.png"))
