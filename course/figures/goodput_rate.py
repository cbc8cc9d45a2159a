"""Figure: throughput and goodput of the s10 reference server against the offered Poisson request
rate, and the TTFT and TPOT percentiles that decide goodput, with the SLO bounds.

Source: solutions/s10_serving/answers/slo_run.json (the reference's run of analysis.py: its server
and benchmark client on one CPU thread, the course model, 16 requests per rate with lengths from
datasets/traces/sharegpt.json) summarised with the s10 reference's `summarize`. Belongs in
course/stages/10-serving.md ("Goodput").
"""

from __future__ import annotations

import json
from pathlib import Path

from course.figures._common import DECODE, PREFILL, SOLUTIONS, pyplot, reference, save

RUN = SOLUTIONS / "s10_serving" / "answers" / "slo_run.json"


def data() -> dict:
    for assignment, package in (("s01_transformer", "transformer"), ("s05_kvcache", "kvcache"),
                                ("p1_minivllm", "minivllm")):
        reference(assignment, package)  # the given packages the server package imports
    serving = reference("s10_serving", "serving")
    run = json.loads(RUN.read_text())
    slo = serving.SLO(**run["slo"])
    rows = []
    for r in run["runs"]:
        records = [serving.RequestRecord(*rec) for rec in r["records"]]
        s = serving.summarize(records, slo)
        rows.append({"rate": r["rate"], "throughput": s.request_throughput, "goodput": s.goodput,
                     "ttft_p50": s.ttft_p50, "ttft_p99": s.ttft_p99, "tpot_p50": s.tpot_p50, "tpot_p99": s.tpot_p99,
                     "records": [list(rec) for rec in r["records"]]})
    return {"rows": rows, "slo": run["slo"], "machine": run.get("machine", "")}


def draw(d: dict, path: str | Path) -> Path:
    plt = pyplot()
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(8.5, 3.4))
    rates = [r["rate"] for r in d["rows"]]
    ax.plot(rates, rates, "k:", lw=0.8, label="offered rate")
    ax.plot(rates, [r["throughput"] for r in d["rows"]], "o-", color=DECODE, label="throughput (completed/s)")
    ax.plot(rates, [r["goodput"] for r in d["rows"]], "s-", color="#2ca02c", label="goodput (met both SLOs)/s")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("Poisson request rate, requests/s")
    ax.set_ylabel("requests/s")
    ax.set_title("Goodput counts only the requests that met both SLOs", fontsize=9, loc="left")
    ax.legend(fontsize=7)
    for key, color, bound in (("ttft", PREFILL, d["slo"]["ttft_s"]), ("tpot", DECODE, d["slo"]["tpot_s"])):
        bx.plot(rates, [r[f"{key}_p50"] for r in d["rows"]], "o--", color=color, label=f"{key.upper()} p50")
        bx.plot(rates, [r[f"{key}_p99"] for r in d["rows"]], "o-", color=color, label=f"{key.upper()} p99")
        bx.axhline(bound, color=color, lw=0.8, ls=":")
        bx.text(rates[0], bound * 1.08, f"{key.upper()} SLO {bound:g} s", fontsize=7, color=color)
    bx.set_xscale("log", base=2)
    bx.set_yscale("log")
    bx.set_xlabel("Poisson request rate, requests/s")
    bx.set_ylabel("seconds")
    bx.set_title("TTFT and TPOT: p50 dashed, p99 solid (one CPU thread)", fontsize=9, loc="left")
    bx.legend(fontsize=6, loc="upper center", ncol=4, bbox_to_anchor=(0.5, -0.2))
    fig.tight_layout()
    return save(fig, path)


if __name__ == "__main__":
    from course.figures._common import PNG_DIR

    print(draw(data(), PNG_DIR / "goodput_rate.png"))
