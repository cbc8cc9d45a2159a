"""Figure: per-GPU goodput of every prefill/decode placement on up to 6 GPUs, and SLO attainment
against the request rate for the best placement, the even split of as many GPUs, and 1 + 1.

Source: the P5 reference's simulator (solutions/p5_pd/disagg/placement.py: best_placement,
simulate, attainment, at_rate) on the course's ShareGPT-like trace (all 1000 requests of
datasets/traces/sharegpt.json, prompts cut to 192 tokens and outputs to 64, as the P5 analysis
cuts them) under linear latency models that are ASSUMPTIONS, not measurements: round numbers of
the order of a LLaMA-3-8B-class model in bf16 on one H100 with a simple engine, and the KV moved
over a 400 Gb/s RDMA NIC (128 KiB a token / 50 GB/s). Belongs in course/stages/10-serving.md
("Capstone P5").
"""

from __future__ import annotations

from pathlib import Path

from course.figures._common import DECODE, PREFILL, REPO, pyplot, reference, save

TRACE = REPO / "datasets" / "traces" / "sharegpt.json"
PROMPT_CAP, OUTPUT_CAP = 192, 64
KV_BYTES_PER_TOKEN = 2 * 32 * 8 * 128 * 2  # K and V x 32 layers x 8 KV heads x 128 x bf16: 128 KiB
LINK_BYTES_PER_S = 400e9 / 8  # a 400 Gb/s RDMA NIC
MODEL = {"prefill_base_s": 0.020, "prefill_per_token_s": 0.0001, "decode_base_s": 0.015,
         "decode_per_seq_s": 0.00015, "transfer_per_token_s": KV_BYTES_PER_TOKEN / LINK_BYTES_PER_S}
SLO = {"ttft_s": 0.2, "tpot_s": 0.04}
MAX_DECODE_BATCH, NUM_GPUS, TARGET = 256, 6, 0.9
RATES = tuple(float(r) for r in range(5, 151, 5))  # requests/s, the whole deployment


def _packages():
    for assignment, package in (("s01_transformer", "transformer"), ("s05_kvcache", "kvcache"),
                                ("p1_minivllm", "minivllm")):
        reference(assignment, package)  # the given packages `disagg` imports
    return reference("p5_pd", "disagg").placement


def trace() -> list:
    """The figure's requests: the whole ShareGPT-like trace, lengths cut to PROMPT_CAP / OUTPUT_CAP."""
    from coursedata.traces import Trace, TraceRequest

    return [TraceRequest(r.arrival_s, min(r.prompt_len, PROMPT_CAP), min(r.output_len, OUTPUT_CAP))
            for r in Trace.load(TRACE).requests]


def data() -> dict:
    pl = _packages()
    reqs = trace()
    model, slo = pl.LatencyModel(**MODEL), pl.SLO(**SLO)
    ranked = pl.best_placement(reqs, model, slo, NUM_GPUS, RATES, MAX_DECODE_BATCH, TARGET)
    best = ranked[0].placement
    shown = [best]
    if best.num_gpus % 2 == 0 and best.num_prefill != best.num_decode:
        shown.append(pl.Placement(best.num_gpus // 2, best.num_gpus // 2))
    shown.append(pl.Placement(1, 1))
    curves = []
    for p in shown:
        att = [pl.attainment(pl.simulate(pl.at_rate(reqs, r), p, model, MAX_DECODE_BATCH), slo) for r in RATES]
        curves.append({"num_prefill": p.num_prefill, "num_decode": p.num_decode, "attainment": att})
    return {"model": MODEL, "slo": SLO, "max_decode_batch": MAX_DECODE_BATCH, "target": TARGET,
            "rates": list(RATES), "num_requests": len(reqs),
            "mean_prompt": sum(r.prompt_len for r in reqs) / len(reqs),
            "mean_output": sum(r.output_len for r in reqs) / len(reqs),
            "ranked": [{"num_prefill": r.placement.num_prefill, "num_decode": r.placement.num_decode,
                        "goodput": r.goodput, "per_gpu": r.per_gpu} for r in ranked],
            "curves": curves}


def draw(d: dict, path: str | Path) -> Path:
    import numpy as np

    plt = pyplot()
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(10, 3.9), gridspec_kw={"width_ratios": [1, 1.25]},
                                 layout="constrained")
    n = NUM_GPUS - 1
    grid = np.full((n, n), np.nan)
    for r in d["ranked"]:
        grid[r["num_prefill"] - 1, r["num_decode"] - 1] = r["per_gpu"]
    ax.imshow(np.ma.masked_invalid(grid), cmap="Greens", origin="lower", vmin=0,
              vmax=np.nanmax(grid) * 1.15, interpolation="nearest")
    best = d["ranked"][0]
    for r in d["ranked"]:
        x, y = r["num_decode"] - 1, r["num_prefill"] - 1
        dark = r["per_gpu"] > 0.6 * np.nanmax(grid)
        ax.text(x, y, f"{r['per_gpu']:.1f}\n({r['goodput']:g}/s)", ha="center", va="center", fontsize=7,
                color="w" if dark else "k")
    ax.add_patch(plt.Rectangle((best["num_decode"] - 1.5, best["num_prefill"] - 1.5), 1, 1, fill=False,
                               edgecolor="k", lw=2))
    ax.set_xticks(range(n), [str(k) for k in range(1, n + 1)])
    ax.set_yticks(range(n), [str(k) for k in range(1, n + 1)])
    ax.set_xlabel("decode instances (GPUs)", color=DECODE)
    ax.set_ylabel("prefill instances (GPUs)", color=PREFILL)
    ax.set_title(f"Goodput per GPU, req/s (total), up to {NUM_GPUS} GPUs", fontsize=9, loc="left")
    styles = ("o-", "s--", "^:")
    colors = ("#2ca02c", DECODE, PREFILL)
    for c, style, color in zip(d["curves"], styles, colors):
        g = c["num_prefill"] + c["num_decode"]
        bx.plot([r / g for r in d["rates"]], c["attainment"], style, color=color, ms=3,
                label=f"{c['num_prefill']} prefill + {c['num_decode']} decode")
    bx.axhline(d["target"], color="k", lw=0.8, ls=":")
    bx.text(0.5, d["target"] + 0.015, f"target {d['target']:.0%} of requests within both SLOs", fontsize=7)
    bx.set_xlabel("request rate per GPU, requests/s")
    bx.set_ylabel("SLO attainment")
    bx.set_ylim(0, 1.05)
    bx.set_xlim(0, 27)
    bx.grid(alpha=0.3)
    bx.legend(fontsize=7, loc="lower left")
    slo, m = d["slo"], d["model"]
    bx.set_title(f"SLO attainment: TTFT <= {slo['ttft_s'] * 1e3:g} ms, TPOT <= {slo['tpot_s'] * 1e3:g} ms\n"
                 f"assumed: prefill {m['prefill_base_s'] * 1e3:g} + {m['prefill_per_token_s'] * 1e3:g} ms/token, "
                 f"decode {m['decode_base_s'] * 1e3:g} + {m['decode_per_seq_s'] * 1e3:g} ms/seq",
                 fontsize=8, loc="left")
    fig.suptitle("Prefill/decode placement on the ShareGPT-like trace (1000 requests, cut to 192 + 64 tokens) "
                 "[P5 best_placement, simulate]", fontsize=10)
    return save(fig, path)


if __name__ == "__main__":
    from course.figures._common import PNG_DIR

    print(draw(data(), PNG_DIR / "pd_placement.png"))
