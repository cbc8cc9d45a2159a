"""Figure: a profiler trace as its timeline: a host thread (operators, launch calls), the GPU
stream, the launch arrows between them, and the GPU's largest idle gap with the host event that
caused it.

Source: the s11 reference (solutions/s11_profiling/traceprof): `temporal_breakdown`, `gaps`,
`largest_gap`, `gap_cause` and `join_launches` on a small synthetic trace built here (two decode
steps of an engine whose host spends a long time in the scheduler between them; times in us,
Kineto's categories). Belongs in course/stages/11-profiling.md.
"""

from __future__ import annotations

from pathlib import Path

from course.figures._common import pyplot, reference, save

# (name, category, start, duration) of host ranges on thread 1; launches below add their calls.
HOST = (("step 1", "user_annotation", 0, 330), ("aten::linear", "cpu_op", 10, 40),
        ("aten::rms_norm", "cpu_op", 60, 30), ("attention", "cpu_op", 100, 40),
        ("aten::linear", "cpu_op", 150, 40),
        ("Scheduler.schedule", "python_function", 340, 380),
        ("step 2", "user_annotation", 730, 260), ("aten::linear", "cpu_op", 740, 40),
        ("aten::rms_norm", "cpu_op", 790, 30), ("attention", "cpu_op", 830, 40),
        ("aten::linear", "cpu_op", 880, 40))
# (launch call start, kernel name, kernel start, kernel duration): the GPU runs behind the host.
LAUNCHES = ((20, "sm90_xmma_gemm_bf16", 40, 160), (70, "rms_norm_kernel", 200, 30),
            (110, "paged_decode_attention", 230, 120), (160, "sm90_xmma_gemm_bf16", 350, 160),
            (750, "sm90_xmma_gemm_bf16", 770, 160), (800, "rms_norm_kernel", 930, 30),
            (840, "paged_decode_attention", 960, 120), (890, "sm90_xmma_gemm_bf16", 1080, 160))
CALL_US = 6
LANES = {"cpu_op": 1.0, "user_annotation": 1.6, "python_function": 1.6, "cuda_runtime": 0.4, "kernel": -0.6}
COLOURS = {"gemm": "#1f77b4", "elementwise": "#2ca02c", "attention": "#9467bd", "other": "#7f7f7f"}


def events(tp) -> list:
    out = [tp.Event(name, cat, float(ts), float(dur), 1, 1, {}) for name, cat, ts, dur in HOST]
    for corr, (call_ts, kernel, k_ts, k_dur) in enumerate(LAUNCHES, start=100):
        out.append(tp.Event("cudaLaunchKernel", "cuda_runtime", float(call_ts), float(CALL_US), 1, 1,
                            {"correlation": corr}))
        out.append(tp.Event(kernel, "kernel", float(k_ts), float(k_dur), 0, 7,
                            {"correlation": corr, "stream": 7, "device": 0}))
    return sorted(out, key=lambda e: (e.ts, -e.dur))


def data() -> dict:
    tp = reference("s11_profiling", "traceprof")
    ev = events(tp)
    gap = tp.largest_gap(ev)
    cause = tp.gap_cause(ev, gap)
    b = tp.temporal_breakdown(ev)
    return {"events": [(e.name, e.cat, e.ts, e.dur) for e in ev],
            "launches": [(x.call.ts, x.call.end, x.gpu.ts, x.delay_us) for x in tp.join_launches(ev)],
            "gaps": [(g.start, g.end) for g in tp.gaps(ev)], "largest": (gap.start, gap.end),
            "cause": None if cause is None else (cause.name, cause.ts, cause.dur),
            "breakdown": {"span": b.span_us, "busy": b.busy_us, "idle": b.idle_us, "idle_fraction": b.idle_fraction},
            "category": {e.name: tp.classify(e.name) for e in ev if e.cat == "kernel"}}


def draw(d: dict, path: str | Path) -> Path:
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(10, 3.6))
    for name, cat, ts, dur in d["events"]:
        y = LANES[cat]
        colour = COLOURS[d["category"][name]] if cat == "kernel" else "#fdd0a2" if cat != "cuda_runtime" else "#d62728"
        if cat in ("user_annotation", "python_function"):
            colour = "#fee6ce" if cat == "user_annotation" else "#fdae6b"
        ax.barh(y, dur, left=ts, height=0.45, color=colour, edgecolor="k", lw=0.4)
        if dur >= 60:
            label = name if cat != "kernel" else d["category"][name]
            ax.text(ts + dur / 2, y, label, ha="center", va="center", fontsize=6.5)
    for call_ts, call_end, gpu_ts, _ in d["launches"]:
        ax.annotate("", (gpu_ts, LANES["kernel"] + 0.23), (call_end, LANES["cuda_runtime"] - 0.23),
                    arrowprops={"arrowstyle": "->", "lw": 0.5, "color": "#555555"})
    g0, g1 = d["largest"]
    ax.axvspan(g0, g1, color="#d62728", alpha=0.12)
    cause = d["cause"][0] if d["cause"] else "none found"
    ax.text((g0 + g1) / 2, -1.2, f"largest GPU gap: {g1 - g0:.0f} us; host meanwhile in {cause}",
            ha="center", fontsize=8, color="#d62728")
    ax.set_yticks([1.6, 1.0, 0.4, -0.6], ["host: ranges", "host: operators", "host: launch calls", "GPU stream 7"],
                  fontsize=8)
    ax.set_ylim(-1.45, 2.0)
    ax.set_xlabel("time (us)")
    b = d["breakdown"]
    fig.suptitle(f"A synthetic trace: GPU span {b['span']:.0f} us, busy {b['busy']:.0f}, idle {b['idle']:.0f} "
                 f"({b['idle_fraction']:.0%}); arrows join each launch call to its kernel by correlation id "
                 "[s11 traceprof]", fontsize=9, x=0.01, ha="left")
    fig.tight_layout()
    return save(fig, path)


if __name__ == "__main__":
    from course.figures._common import PNG_DIR

    print(draw(data(), PNG_DIR / "trace_gap.png"))
