"""Figure: MLA's weight absorption. Projecting every cached latent back up through kv_b each decode
step (as transformers runs DeepSeek-V3) against attending in the latent space with kv_b's halves
folded into the query and the output: FLOPs per cached token, intensity, and a decode step's FLOPs
over the context.

Source: the s12 reference (solutions/s12_architectures/modelmath): `from_config` on
datasets/model_configs/deepseek-v3.json and llama-3-8b.json, `decode_flops`,
`attention_flops_per_pair`, `latent_up_flops_per_key`, `kv_bytes_per_token`. The absorbed cost is
computed here from the same `Arch` fields (the reference counts the unabsorbed model only):
per cached token and layer 2 H (r_kv + d_rope) for the scores plus 2 H r_kv for the values; per
new token and layer 2 H d_nope r_kv (W_UK into q) plus 2 H r_kv d_v (W_UV after attention).
Ridges from course/figures/roofline.py's specs. Belongs in course/stages/12-architectures.md
("MLA's bargain").
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from course.figures._common import REPO, pyplot, reference, save

CONFIG_DIR = REPO / "datasets" / "model_configs"
CONTEXTS = np.logspace(10, 17, 29, base=2).astype(int)  # 1k .. 128k tokens
RIDGES = {"H200 ridge": 206, "H100 SXM ridge": 295}  # bf16 FLOP/byte, stage 0


def absorbed_per_key(arch) -> int:
    """FLOPs per cached token per layer with W_UK and W_UV absorbed: every head scores against the
    shared latent + rope key and sums latents."""
    m = arch.mla
    return 2 * arch.num_heads * (m.kv_lora_rank + m.qk_rope_head_dim) + 2 * arch.num_heads * m.kv_lora_rank


def absorbed_per_token(arch) -> int:
    """FLOPs per new token per layer of the absorption itself: q_nope through W_UK, the latent
    output through W_UV."""
    m = arch.mla
    return 2 * arch.num_heads * m.qk_nope_head_dim * m.kv_lora_rank + 2 * arch.num_heads * m.kv_lora_rank * m.v_head_dim


def data() -> dict:
    mm = reference("s12_architectures", "modelmath")
    ds = mm.from_config(json.loads((CONFIG_DIR / "deepseek-v3.json").read_text()))
    llama = mm.from_config(json.loads((CONFIG_DIR / "llama-3-8b.json").read_text()))
    key_bytes = mm.kv_bytes_per_token(ds, 2) // ds.num_layers  # bytes one cached token holds per layer
    llama_key_bytes = mm.kv_bytes_per_token(llama, 2) // llama.num_layers
    naive_key = mm.attention_flops_per_pair(ds) + mm.latent_up_flops_per_key(ds)
    L = ds.num_layers
    naive = [mm.decode_flops(ds, int(c)) for c in CONTEXTS]
    linear = mm.decode_flops(ds, 1) - L * naive_key  # everything that does not grow with the context
    absorbed = [linear + L * absorbed_per_token(ds) + L * absorbed_per_key(ds) * int(c) for c in CONTEXTS]
    return {"contexts": CONTEXTS.tolist(), "naive": naive, "absorbed": absorbed, "linear": linear,
            "key_bytes": key_bytes,
            "intensity": {"Llama-3-8B GQA (g = 4)": mm.attention_flops_per_pair(llama) / llama_key_bytes,
                          "DeepSeek-V3 MLA, absorbed": absorbed_per_key(ds) / key_bytes,
                          "DeepSeek-V3 MLA, up-projected": naive_key / key_bytes},
            "per_key": {"absorbed": absorbed_per_key(ds), "up-projected": naive_key}}


def draw(d: dict, path: str | Path) -> Path:
    plt = pyplot()
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(10, 3.9), gridspec_kw={"width_ratios": [1, 1.1]})
    names = list(d["intensity"])
    values = [d["intensity"][n] for n in names]
    ax.barh(range(len(names)), values, color=["#1f77b4", "#2ca02c", "#d62728"])
    for i, v in enumerate(values):
        ax.text(v * 1.15, i, f"{v:,.0f}", va="center", fontsize=8)
    for (label, ridge), style in zip(RIDGES.items(), (":", "--")):
        ax.axvline(ridge, color="k", ls=style, lw=0.8, label=f"{label} ({ridge})")
    ax.set_xscale("log")
    ax.set_xlim(1, 3e5)
    ax.set_yticks(range(len(names)), [n.replace(", ", ",\n") for n in names], fontsize=7.5)
    ax.set_xlabel("decode attention FLOPs per byte of cached token (bf16)")
    ax.set_title(f"one cached token: {d['key_bytes']:,} B a layer; "
                 "q.(W_UK c) = (W_UK^T q).c", fontsize=8.5, loc="left")
    ax.legend(fontsize=7, loc="lower right")
    c = np.array(d["contexts"])
    bx.loglog(c, d["naive"], color="#d62728", label="latents projected up every step (transformers)")
    bx.loglog(c, d["absorbed"], color="#2ca02c", label="W_UK, W_UV absorbed (attention in the latent space)")
    bx.axhline(d["linear"], color="k", lw=0.8, ls="--", label="linear layers + LM head alone")
    i = int(np.argmin(np.abs(c - 32768)))
    bx.annotate(f"{d['naive'][i]:.2g}", (c[i], d["naive"][i]), textcoords="offset points", xytext=(-30, 6), fontsize=7.5)
    bx.annotate(f"{d['absorbed'][i]:.2g}", (c[i], d["absorbed"][i]), textcoords="offset points", xytext=(-30, 6),
                fontsize=7.5)
    bx.set_xlabel("context (tokens)")
    bx.set_ylabel("FLOPs of one decode step")
    bx.set_title("DeepSeek-V3, one sequence (labels at 32k)", fontsize=8.5, loc="left")
    bx.legend(fontsize=7, loc="lower right")
    bx.grid(alpha=0.3, which="both")
    fig.suptitle("MLA weight absorption: the same attention, the up-projection moved out of the per-token loop "
                 "[s12 modelmath]", fontsize=10, x=0.01, ha="left")
    fig.tight_layout()
    return save(fig, path)


if __name__ == "__main__":
    from course.figures._common import PNG_DIR

    print(draw(data(), PNG_DIR / "mla_absorption.png"))
