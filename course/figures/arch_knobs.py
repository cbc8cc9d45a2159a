"""Figure: the seven course configs side by side: the knobs each turns, total vs active
parameters, and the KV-cache bytes one token adds.

Source: the s12 reference (solutions/s12_architectures/modelmath): `from_config`, `six_knobs`,
`param_count` (total and active) and `kv_bytes_per_token` (bf16) on datasets/model_configs/*.json.
Belongs in course/stages/12-architectures.md ("The seven configs").
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from course.figures._common import REPO, pyplot, reference, save

CONFIGS = {"LLaMA-3-8B": "llama-3-8b", "LLaMA-3-70B": "llama-3-70b", "Qwen2.5-7B": "qwen2.5-7b",
           "Qwen3-8B": "qwen3-8b", "Gemma-7B": "gemma-7b", "Mixtral 8x7B": "mixtral-8x7b",
           "DeepSeek-V3": "deepseek-v3"}
CONFIG_DIR = REPO / "datasets" / "model_configs"
ATTENTION_COLOURS = {"MHA": "#d62728", "GQA": "#1f77b4", "MQA": "#17becf", "MLA": "#2ca02c"}


def data() -> dict:
    mm = reference("s12_architectures", "modelmath")
    out = {}
    for name, stem in CONFIGS.items():
        arch = mm.from_config(json.loads((CONFIG_DIR / f"{stem}.json").read_text()))
        k = mm.six_knobs(arch)
        out[name] = {"params": mm.param_count(arch), "active": mm.param_count(arch, active=True),
                     "kv_bytes": mm.kv_bytes_per_token(arch, 2), "attention": k.attention, "kv_heads": k.kv_heads,
                     "norm": k.norm, "activation": k.activation, "positional": k.positional, "moe": k.moe}
    return out


def _knob_label(r: dict) -> str:
    attention = r["attention"] + ("" if r["attention"] in ("MLA", "MHA") else f" {r['kv_heads']}")
    extras = [r["activation"]] + (["QK-norm"] if "QK" in r["norm"] else []) + \
        ([r["moe"].replace(" routed", "").replace(" shared", " sh.")] if r["moe"] != "dense" else [])
    return attention + "\n" + ", ".join(extras)


def draw(d: dict, path: str | Path) -> Path:
    plt = pyplot()
    names = list(d)
    y = np.arange(len(names))[::-1]
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(10, 4.2), sharey=True)
    total = np.array([d[n]["params"] for n in names]) / 1e9
    active = np.array([d[n]["active"] for n in names]) / 1e9
    ax.barh(y, total, color="#c6dbef", edgecolor="k", lw=0.4, label="total")
    ax.barh(y, active, height=0.45, color="#08519c", label="active per token")
    ax.set_xscale("log")
    ax.set_xlabel("parameters (billions, log scale)")
    for yi, n, t in zip(y, names, total):
        ax.text(t * 1.08, yi, f"{t:,.1f}B" + ("" if d[n]["active"] == d[n]["params"] else
                                              f" ({d[n]['active'] / 1e9:.1f}B active)"), va="center", fontsize=7)
    ax.set_xlim(3, 5e4)
    ax.legend(fontsize=7, loc="upper right")
    ax.set_yticks(y, [f"{n}\n{_knob_label(d[n])}" for n in names], fontsize=7)
    kv = np.array([d[n]["kv_bytes"] for n in names]) / 1024
    bx.barh(y, kv, color=[ATTENTION_COLOURS[d[n]["attention"]] for n in names], edgecolor="k", lw=0.4)
    for yi, v in zip(y, kv):
        bx.text(v + 5, yi, f"{v:,.0f} KiB", va="center", fontsize=7)
    bx.set_xlim(0, kv.max() * 1.25)
    bx.set_xlabel("KV cache per token, bf16 (KiB)")
    from matplotlib.patches import Patch

    bx.legend(handles=[Patch(color=c, label=a) for a, c in ATTENTION_COLOURS.items() if any(
        d[n]["attention"] == a for n in names)], fontsize=7, loc="lower right", title="attention", title_fontsize=7)
    fig.suptitle("Seven configs, read from config.json alone: the knobs, the parameters, the KV bytes "
                 "[s12 modelmath]", fontsize=10, x=0.01, ha="left")
    fig.tight_layout()
    return save(fig, path)


if __name__ == "__main__":
    from course.figures._common import PNG_DIR

    print(draw(data(), PNG_DIR / "arch_knobs.png"))
