"""Figure: GPipe's all-forward-all-backward (AFAB) and 1F1B on the same pipeline, as per-stage
timelines, with the activations each stage holds over time.

Source: the s02 reference (solutions/s02_parallel/parallel/pipeline.py): `afab_schedule` and
`one_f_one_b_schedule` give the per-stage action lists, `simulate_schedule` plays them (forward 1
unit, backward 2, communication free) and returns every action's start time and the bubble.
Belongs in course/stages/02-parallel-strategies.md ("pipeline bubble" rows of Key formulas).
"""

from __future__ import annotations

from pathlib import Path

from course.figures._common import pyplot, reference, save

STAGES, MICROBATCHES, T_F, T_B = 4, 8, 1.0, 2.0
FORWARD, BACKWARD = "#9ecae1", "#fdae6b"


def _run(par, schedule) -> dict:
    timeline = par.simulate_schedule(schedule, forward_time=T_F, backward_time=T_B)
    actions = [[(a.kind, a.microbatch, start, T_F if a.kind == "F" else T_B)
                for a, start in zip(stage, starts)] for stage, starts in zip(schedule, timeline.start)]
    return {"actions": actions, "makespan": timeline.makespan, "bubble": timeline.bubble_fraction,
            "in_flight": [_in_flight(stage) for stage in actions]}


def _in_flight(actions) -> list[tuple[float, int]]:
    """(time, micro-batches whose activations the stage holds) after each change: +1 when a forward
    starts, -1 when a backward ends."""
    delta: dict[float, int] = {}
    for kind, _, start, dur in actions:  # changes at one instant net out (a B ends as an F starts)
        t = start if kind == "F" else start + dur
        delta[t] = delta.get(t, 0) + (1 if kind == "F" else -1)
    held, out = 0, [(0.0, 0)]
    for t in sorted(delta):
        held += delta[t]
        out.append((t, held))
    return out


def data() -> dict:
    par = reference("s02_parallel", "parallel")
    p, m = STAGES, MICROBATCHES
    return {"p": p, "m": m, "bubble_formula": par.bubble_fraction(p, m),
            "runs": {"AFAB (GPipe)": _run(par, par.afab_schedule(p, m)),
                     "1F1B (PipeDream-Flush)": _run(par, par.one_f_one_b_schedule(p, m))}}


def _draw_timeline(ax, name: str, run: dict, p: int) -> None:
    for s, actions in enumerate(run["actions"]):
        for kind, mb, start, dur in actions:
            ax.barh(p - 1 - s, dur, left=start, height=0.8, color=FORWARD if kind == "F" else BACKWARD,
                    edgecolor="k", lw=0.4)
            ax.text(start + dur / 2, p - 1 - s, f"{kind}{mb}", ha="center", va="center", fontsize=6.5)
    ax.set_yticks(range(p), [f"stage {s}" for s in reversed(range(p))])
    ax.set_xlim(0, run["makespan"])
    ax.set_title(f"{name}: makespan {run['makespan']:.0f} units, bubble {run['bubble']:.1%}", fontsize=9, loc="left")


def draw(d: dict, path: str | Path) -> Path:
    plt = pyplot()
    runs = d["runs"]
    fig, axes = plt.subplots(3, 1, figsize=(10, 5.6), sharex=True, gridspec_kw={"height_ratios": [1, 1, 0.9]})
    for ax, (name, run) in zip(axes, runs.items()):
        _draw_timeline(ax, name, run, d["p"])
    ax = axes[2]
    for (name, run), style in zip(runs.items(), ("--", "-")):
        t, held = zip(*run["in_flight"][0])
        ax.step(t, held, where="post", ls=style, color="k", label=f"{name.split()[0]}, stage 0")
    ax.set_yticks(range(0, d["m"] + 1, 2))
    ax.set_ylabel("activations held\n(micro-batches)")
    ax.set_xlabel(f"time (forward = {T_F:.0f} unit, backward = {T_B:.0f}; communication free)")
    ax.legend(fontsize=8, loc="upper right")
    ax.grid(alpha=0.3)
    fig.suptitle(f"p = {d['p']} stages, m = {d['m']} micro-batches: same bubble (p-1)/(m+p-1) = "
                 f"{d['bubble_formula']:.1%}, 1F1B holds at most p [s02 simulate_schedule]",
                 fontsize=10, x=0.01, ha="left")
    fig.tight_layout()
    return save(fig, path)


if __name__ == "__main__":
    from course.figures._common import PNG_DIR

    print(draw(data(), PNG_DIR / "pipeline_schedules.png"))
