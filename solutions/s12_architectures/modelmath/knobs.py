"""The "six knobs" on which decoder-only LLMs differ, read from their architectures."""

from __future__ import annotations

from dataclasses import dataclass

from modelmath.arch import Arch

HEADER = ("model", "attention", "KV heads", "norm", "activation", "positional", "MoE")


@dataclass(frozen=True)
class Knobs:
    # checked in this order: "MLA" (an MLA arch), "MHA" (kv heads == heads, so a 1-head model is
    # MHA), "MQA" (1 kv head), "GQA" (in between)
    attention: str
    kv_heads: int     # K/V heads held in the cache per layer; MLA: 1 (one shared latent)
    norm: str         # "RMSNorm", or "RMSNorm + QK-norm" with per-head q/k norms
    # from the activation name, case-insensitive: "SwiGLU" for exactly "silu" or "swish", "GeGLU" for
    # a name that starts with "gelu" ("gelu", "gelu_new", "gelu_pytorch_tanh"; not "quick_gelu")
    activation: str
    positional: str   # f"RoPE θ={rope_theta:.0f}", plus f", {rope_scaling}" when scaled
    moe: str          # "dense", f"{E} experts, top-{k}", or f"{E} routed + {S} shared, top-{k}" with shared experts


def six_knobs(arch: Arch) -> Knobs:
    """The six knobs of `arch`, spelled as the field comments say. ValueError naming the activation
    when it is neither silu/swish nor starts with "gelu"."""
    # BEGIN SOLUTION
    if arch.mla is not None:
        attention, kv = "MLA", 1
    else:
        kv = arch.num_kv_heads
        attention = "MHA" if kv == arch.num_heads else "MQA" if kv == 1 else "GQA"
    act = arch.activation.lower()
    if act in ("silu", "swish"):
        activation = "SwiGLU"
    elif act.startswith("gelu"):
        activation = "GeGLU"
    else:
        raise ValueError(f"unknown activation {arch.activation!r}: expected silu/swish or a gelu variant")
    positional = f"RoPE θ={arch.rope_theta:.0f}" + (f", {arch.rope_scaling}" if arch.rope_scaling else "")
    moe = arch.moe
    if moe is None:
        experts = "dense"
    elif moe.shared_experts:
        experts = f"{moe.num_experts} routed + {moe.shared_experts} shared, top-{moe.top_k}"
    else:
        experts = f"{moe.num_experts} experts, top-{moe.top_k}"
    return Knobs(attention, kv, "RMSNorm + QK-norm" if arch.qk_norm else "RMSNorm", activation, positional, experts)
    # END SOLUTION


def knobs_table(archs: dict[str, Arch]) -> str:
    """A Markdown table of the six knobs: the header row `HEADER`, the separator row, then one row per
    model in the dict's order (`| name | attention | kv_heads | norm | activation | positional | moe |`).
    Rows are "| " + " | ".join(cells) + " |"; the separator has "---" in each cell; lines end with
    a newline."""
    # BEGIN SOLUTION
    def row(cells) -> str:
        return "| " + " | ".join(str(c) for c in cells) + " |\n"

    out = row(HEADER) + row(["---"] * len(HEADER))
    for name, arch in archs.items():
        k = six_knobs(arch)
        out += row([name, k.attention, k.kv_heads, k.norm, k.activation, k.positional, k.moe])
    return out
    # END SOLUTION
