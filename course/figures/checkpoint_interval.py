"""Figure: the time a job loses to checkpoints and failures against the checkpoint interval, the
first-order model C / tau + tau / (2 M) with Young/Daly's optimum sqrt(2 C M), and the s14
reference's supervisor replaying the analysis trace at several intervals.

Source: solutions/s14_fault_tolerance/analysis.py (its constants: 16 nodes, 2 s steps, C = 30 s,
a node MTBF of 10 h; its failure trace) and the s14 reference's Supervisor and commit_checkpoint
(`replay`). Belongs in course/stages/14-fault-tolerance.md ("How often to checkpoint").
"""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

from course.figures._common import SOLUTIONS, pyplot, reference, save

INTERVALS = (25, 50, 100, 200, 500, 1000)


def _analysis():
    reference("s14_fault_tolerance", "faulttol")
    path = SOLUTIONS / "s14_fault_tolerance" / "analysis.py"
    spec = importlib.util.spec_from_file_location("s14_fault_tolerance_analysis", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def data() -> dict:
    a = _analysis()
    mtbf = a.MTBF_NODE_H * 3600 / a.NODES
    taus = [10 * 1.05**k for k in range(120) if 10 * 1.05**k <= 1500]
    model = [{"steps": t, "overhead": a.C_SYNC / (t * a.T_STEP) + t * a.T_STEP / (2 * mtbf)} for t in taus]
    ideal = a.STEPS * a.T_STEP / 3600
    replays = [{"every": e, **a.replay(e)} for e in INTERVALS]
    for r in replays:
        r["overhead"] = r["wall_hours"] / ideal - 1
    return {"model": model, "replays": replays, "young_daly_steps": a.young_daly_steps(), "mtbf_s": mtbf,
            "c_s": a.C_SYNC, "t_step": a.T_STEP, "failures": len(a.FAILURES)}


def draw(d: dict, path: str | Path) -> Path:
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7.5, 3.6))
    ax.plot([m["steps"] for m in d["model"]], [m["overhead"] for m in d["model"]], color="#1f77b4",
            label=f"model C/τ + τ/(2M)  (C = {d['c_s']:.0f} s, M = {d['mtbf_s']:.0f} s)")
    ax.scatter([r["every"] for r in d["replays"]], [r["overhead"] for r in d["replays"]], color="#d62728", zorder=3,
               label=f"replay of a trace with {d['failures']} failures [s14 Supervisor]")
    for r in d["replays"]:
        ax.annotate(f"{r['lost_steps']} lost", (r["every"], r["overhead"]), textcoords="offset points",
                    xytext=(4, 6), fontsize=7)
    ax.axvline(d["young_daly_steps"], color="k", ls="--", lw=0.8)
    ax.text(d["young_daly_steps"] * 1.05, 0.75, f"√(2CM) = {d['young_daly_steps']:.0f} steps", fontsize=8)
    ax.set_xscale("log")
    ax.set_xlabel(f"checkpoint interval τ, steps of {d['t_step']:.0f} s")
    ax.set_ylabel("time lost / useful time")
    ax.set_title("Checkpoint often: pay C each time; rarely: redo τ/2 per failure", fontsize=9, loc="left")
    ax.legend(fontsize=7, loc="upper right")
    fig.tight_layout()
    return save(fig, path)


if __name__ == "__main__":
    from course.figures._common import PNG_DIR

    print(draw(data(), PNG_DIR / "checkpoint_interval.png"))
