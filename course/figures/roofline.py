"""Figure: the bf16 roofline of the H100 SXM and the H200, with analytic points of five Llama-3-8B
kernels.

Sources: peaks and HBM bandwidths from the s00 reference's `specs.py` (H100_SXM, H200, datasheet
values); the roof and the points from its `roofline.py` (`attainable_flops`, `ridge_point`,
`analyze`) and `workloads.py` (ideal FLOPs and bytes of a fused kernel); shapes from
datasets/model_configs/llama-3-8b.json read by the s01 reference's `LlamaConfig`. The points are
ANALYTIC (the repository commits no per-kernel measurement file). Belongs in
course/stages/00-hardware.md, "Key formulas" (ridge point, GEMM, GEMV, attention rows).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from course.figures._common import REPO, pyplot, reference, save

MODEL_CONFIG = REPO / "datasets" / "model_configs" / "llama-3-8b.json"
DTYPE, DTYPE_BYTES = "bf16", 2
PREFILL_TOKENS, CONTEXT, BATCH = 2048, 4096, 64
LABEL_OFFSETS = ((-8, 8), (8, -30), (-8, -38), (8, -30), (8, -38))  # layout only, in points


def _workloads(hw, cfg) -> dict:
    """Name -> Workload for the kernels of one Llama-3-8B layer at the sizes above."""
    d, f, h, hkv, hd = (cfg.hidden_size, cfg.intermediate_size, cfg.num_attention_heads,
                        cfg.num_key_value_heads, cfg.head_dim)
    return {
        "decode GEMV, batch 1\n(down_proj)": hw.gemv_workload(d, f, DTYPE_BYTES, batch=1),
        f"decode GEMM, batch {BATCH}\n(down_proj)": hw.gemv_workload(d, f, DTYPE_BYTES, batch=BATCH),
        f"prefill GEMM, {PREFILL_TOKENS} tokens\n(down_proj)": hw.gemm_workload(PREFILL_TOKENS, d, f, DTYPE_BYTES),
        f"decode attention, ctx {CONTEXT}\n(GQA {h}/{hkv})": hw.attention_decode_workload(
            1, h, CONTEXT, hd, DTYPE_BYTES, n_kv_heads=hkv),
        f"prefill attention, causal\nS = {CONTEXT}": hw.attention_prefill_workload(
            1, h, CONTEXT, hd, DTYPE_BYTES, n_kv_heads=hkv, causal=True),
    }


def data() -> dict:
    """Devices (peak, bandwidth, ridge, roof curve) and the workloads placed on each."""
    hw = reference("s00_hardware", "hwnumerics")
    cfg = reference("s01_transformer", "transformer").LlamaConfig.from_json(MODEL_CONFIG)
    intensity = np.logspace(-1, 4.5, 200)
    devices = {}
    for dev in (hw.H100_SXM, hw.H200):
        devices[dev.name] = {
            "peak": dev.peak(DTYPE), "mem_bw": dev.mem_bw, "ridge": hw.ridge_point(dev, DTYPE),
            "roof": np.array([hw.attainable_flops(dev, DTYPE, i) for i in intensity]),
        }
    points = {}
    for name, work in _workloads(hw, cfg).items():
        on = {dev.name: hw.analyze(work, dev, DTYPE) for dev in (hw.H100_SXM, hw.H200)}
        points[name] = {"flops": work.flops, "bytes": work.bytes, "intensity": work.intensity,
                        "attainable": {k: p.attainable_flops for k, p in on.items()},
                        "bound": {k: p.bound for k, p in on.items()}}
    return {"intensity": intensity, "devices": devices, "points": points, "model": MODEL_CONFIG.name}


def _fmt(x: float) -> str:
    return f"{x:,.0f}" if x >= 10 else f"{x:.2g}"


def draw(d: dict, path: str | Path) -> Path:
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(8.5, 5.2))
    styles = {"H100 SXM": ("#7f7f7f", "--"), "H200": ("#d62728", "-")}
    for name, dev in d["devices"].items():
        color, ls = styles.get(name, ("k", "-"))
        ax.loglog(d["intensity"], dev["roof"] / 1e12, color=color, ls=ls, lw=2,
                  label=f"{name}: {dev['peak'] / 1e12:.0f} TFLOP/s, {dev['mem_bw'] / 1e12:.2f} TB/s, "
                        f"ridge {dev['ridge']:.0f} FLOP/B")
        ax.axvline(dev["ridge"], color=color, ls=":", lw=1)
    for k, (name, p) in enumerate(d["points"].items()):
        y = p["attainable"]["H200"] / 1e12
        marker = "o" if p["bound"]["H200"] == "memory" else "s"
        ax.plot(p["intensity"], y, marker, color=f"C{k}", ms=8, mec="k")
        dx, dy = LABEL_OFFSETS[k % len(LABEL_OFFSETS)]
        ax.annotate(f"{name}\nI = {_fmt(p['intensity'])} FLOP/B", (p["intensity"], y), fontsize=7,
                    xytext=(dx, dy), textcoords="offset points", ha="left" if dx >= 0 else "right")
    ax.set(xlabel="arithmetic intensity (FLOP / byte of HBM traffic)", ylabel="attainable TFLOP/s (bf16)",
           xlim=(d["intensity"][0], d["intensity"][-1]), ylim=(0.05, 3000))
    ax.grid(alpha=0.3, which="both")
    ax.legend(loc="upper left", fontsize=8)
    ax.set_title(f"Roofline, dense bf16 (datasheet peaks). Points: ANALYTIC ideal-traffic kernels of "
                 f"{d['model']}\non the H200 roof (circle: memory-bound, square: compute-bound)", fontsize=9)
    fig.tight_layout()
    return save(fig, path)


if __name__ == "__main__":
    from course.figures._common import PNG_DIR

    print(draw(data(), PNG_DIR / "roofline.png"))
