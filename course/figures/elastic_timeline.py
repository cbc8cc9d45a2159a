"""Figure: steps done against wall-clock time of the analysis job (16 nodes, a checkpoint every 200
steps) with the s14 reference's supervisor: each node failure stalls the job for the detection
and restart, then the survivors resume from the last checkpoint and compute the lost steps again.

Source: solutions/s14_fault_tolerance/analysis.py's `replay(200, trace)` with the s14 reference's
Supervisor and commit_checkpoint. Belongs in course/stages/14-fault-tolerance.md ("Elastic restart").
"""

from __future__ import annotations

from pathlib import Path

from course.figures._common import pyplot, save
from course.figures.checkpoint_interval import _analysis

EVERY = 200


def data() -> dict:
    a = _analysis()
    trace: list = []
    summary = a.replay(EVERY, trace)
    points = [(t, s) for t, s, kind in trace if kind == ""]
    fails = [(t, s) for t, s, kind in trace if kind == "fail"]
    relaunches = [(t, s) for t, s, kind in trace if kind == "restart"]
    return {"points": points, "fails": fails, "relaunches": relaunches, "every": EVERY, "steps": a.STEPS, **summary}


def draw(d: dict, path: str | Path) -> Path:
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7.5, 3.4))
    ax.plot([t / 60 for t, _ in d["points"]], [s for _, s in d["points"]], color="#1f77b4", lw=1.2, label="steps done")
    ax.scatter([t / 60 for t, _ in d["fails"]], [s for _, s in d["fails"]], marker="x", color="#d62728", zorder=3,
               label="a node dies")
    ax.scatter([t / 60 for t, _ in d["relaunches"]], [s for _, s in d["relaunches"]], marker="o", color="#2ca02c",
               zorder=3, label="survivors relaunched from the last checkpoint")
    for k in range(d["every"], d["steps"] + 1, d["every"]):
        ax.axhline(k, color="#d9d9d9", lw=0.5, zorder=0)
    ax.set_xlabel("wall-clock time, minutes")
    ax.set_ylabel("steps done")
    ax.set_title(f"Checkpoint every {d['every']} steps: {d['restarts']} restarts, {d['lost_steps']} steps computed "
                 f"again, {d['wall_hours']:.2f} h [s14 Supervisor]", fontsize=9, loc="left")
    ax.legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    return save(fig, path)


if __name__ == "__main__":
    from course.figures._common import PNG_DIR

    print(draw(data(), PNG_DIR / "elastic_timeline.png"))
