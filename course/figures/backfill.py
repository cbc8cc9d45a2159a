"""Figure: strict FIFO against EASY backfill on the stage's trace A, as GPU x time charts: the
small jobs run in the hole before the gang's reservation, and the gang still starts on time.

Source: the s13 reference (solutions/s13_cluster/clustersim): `simulate` with `FifoPolicy` and
`EasyBackfillPolicy`, `summarize`, and `reservation_time` for the head gang at its arrival, on
trace A of the public tests (two nodes a, b of 4 GPUs; J0 1x4 GPUs for 10 s at 0, J1 2x4 for 5 s
at 1, J2 1x2 for 8 s at 2, J3 1x2 for 6 s at 3). Belongs in course/stages/13-cluster-scheduling.md
("What the simulator shows").
"""

from __future__ import annotations

from pathlib import Path

from course.figures._common import pyplot, reference, save

NODES = (("a", 4), ("b", 4))
# (job_id, arrival, duration, pods, gpus_per_pod)
TRACE = ((0, 0, 10, 1, 4), (1, 1, 5, 2, 4), (2, 2, 8, 1, 2), (3, 3, 6, 1, 2))
COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e")


def _spec_and_jobs(cs):
    spec = cs.ClusterSpec(tuple(cs.NodeSpec(name, n) for name, n in NODES))
    jobs = [cs.Job(job_id=i, arrival=a, duration=d, pods=p, gpus_per_pod=g) for i, a, d, p, g in TRACE]
    return spec, jobs


def data() -> dict:
    cs = reference("s13_cluster", "clustersim")
    spec, jobs = _spec_and_jobs(cs)
    out = {}
    for name, policy in (("strict FIFO", cs.FifoPolicy()), ("EASY backfill", cs.EasyBackfillPolicy())):
        result = cs.simulate(spec, jobs, policy)
        s = cs.summarize(result)
        out[name] = {"segments": [(seg.job_id, seg.start, seg.end, [(slot.node, slot.gpu) for pod in seg.pods
                                                                     for slot in pod]) for seg in result.segments],
                     "mean_wait": s.mean_wait, "utilisation": s.utilisation, "makespan": s.makespan}
    cluster = cs.Cluster(spec)  # at t = 1: J0 runs on node a, J1 (the head) arrives and does not fit
    head, first = jobs[1], jobs[0]
    cluster.bind(first.job_id, cs.place_gang(cluster, first))
    out["reservation"] = cs.reservation_time(cluster, {first.job_id: first.arrival + first.duration}, head, head.arrival)
    return out


def _draw(ax, name: str, run: dict, reservation: float | None) -> None:
    rows = [(node, g) for node, n in NODES for g in range(n)]
    for job_id, start, end, slots in run["segments"]:
        for slot in slots:
            y = len(rows) - 1 - rows.index(tuple(slot))
            ax.barh(y, end - start, left=start, height=0.8, color=COLOURS[job_id], edgecolor="k", lw=0.4)
            ax.text((start + end) / 2, y, f"J{job_id}", ha="center", va="center", fontsize=7, color="w")
    for job_id, arrival, *_ in TRACE:
        ax.plot([arrival], [len(rows) - 0.3], marker="v", color=COLOURS[job_id], ms=6)
    if reservation is not None:
        ax.axvline(reservation, color="k", ls="--", lw=0.9)
    ax.set_yticks(range(len(rows)), [f"{n}{g}" for n, g in reversed(rows)], fontsize=7)
    ax.set_title(f"{name}: mean wait {run['mean_wait']:.2f} s, utilisation {run['utilisation']:.2f}, "
                 f"makespan {run['makespan']:g} s"
                 + ("" if reservation is None else f"; dashed: J1's reservation S = {reservation:g} s"),
                 fontsize=9, loc="left")
    ax.set_ylim(-0.6, len(rows) + 0.1)
    ax.set_xlim(-0.6, None)  # room for the arrival mark at t = 0
    ax.grid(axis="x", alpha=0.3)


def draw(d: dict, path: str | Path) -> Path:
    plt = pyplot()
    fig, axes = plt.subplots(2, 1, figsize=(9, 4.6), sharex=True)
    _draw(axes[0], "strict FIFO", d["strict FIFO"], None)
    _draw(axes[1], "EASY backfill", d["EASY backfill"], d["reservation"])
    axes[1].set_xlabel("time (s); triangles: arrivals. J0 4 GPUs x 10 s, J1 a gang of 2 x 4 GPUs x 5 s, "
                       "J2 2 x 8 s, J3 2 x 6 s")
    fig.suptitle("Trace A on two 4-GPU nodes: GPU (rows) by time [s13 simulate]", fontsize=10, x=0.01, ha="left")
    fig.tight_layout()
    return save(fig, path)


if __name__ == "__main__":
    from course.figures._common import PNG_DIR

    print(draw(data(), PNG_DIR / "backfill.png"))
