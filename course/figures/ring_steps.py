"""Figure: the ring all-reduce step by step, a reduce-scatter then an all-gather, as what each rank
holds of each block after every step.

Source: the s03 reference (solutions/s03_collectives/collectives/ring.py): `ring_all_reduce` on
four ranks (threads of one process, course/figures/_fakedist.py standing in for torch.distributed
and logging every message). Rank r's input is one-hot: element j of block b is (b + 1) if j == r,
so a message shows which block it is (its value) and whose contributions it carries (its nonzero
places). The panels replay the logged messages; tests check the replay ends where the reference
does and that every rank ends with the sum. Belongs in course/stages/03-collectives.md.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from course.figures import _fakedist
from course.figures._common import pyplot, reference, save

WORLD = 4


def _input(rank: int) -> torch.Tensor:
    """(WORLD * WORLD,): block b (WORLD elements) is (b + 1) at element `rank`, 0 elsewhere."""
    x = torch.zeros(WORLD, WORLD, dtype=torch.float64)
    x[:, rank] = torch.arange(1, WORLD + 1, dtype=torch.float64)
    return x.reshape(-1)


def data() -> dict:
    col = reference("s03_collectives", "collectives")

    def body(fake, rank):
        return col.ring_all_reduce(_input(rank)).tolist()

    results, fake = _fakedist.run(WORLD, [col.ring, col.p2p], body)
    sends = [[c for c in fake.calls if c.rank == r and c.op == "send"] for r in range(WORLD)]
    steps = []  # steps[k] = [(rank, block, contributors)] of the k-th message of every rank
    for k in range(len(sends[0])):
        row = []
        for r in range(WORLD):
            v = np.array(sends[r][k].values)
            block = int(v.max()) - 1
            row.append((r, block, tuple(int(j) for j in np.flatnonzero(v)), sends[r][k].peer))
        steps.append(row)
    return {"world": WORLD, "steps": steps, "states": _replay(steps), "results": results}


def _replay(steps) -> list[np.ndarray]:
    """holds[r, b] = how many ranks' contributions rank r has in block b, after each step (the
    first half adds what arrives, the second half overwrites)."""
    n = WORLD
    held = [[{r} for _ in range(n)] for r in range(n)]
    states = [np.ones((n, n), dtype=int)]
    for k, row in enumerate(steps):
        for r, block, contributors, peer in row:
            if k < n - 1:
                held[peer][block] |= set(contributors)
            else:
                held[peer][block] = set(contributors)
        states.append(np.array([[len(held[r][b]) for b in range(n)] for r in range(n)]))
    return states


def draw(d: dict, path: str | Path) -> Path:
    plt = pyplot()
    n, steps, states = d["world"], d["steps"], d["states"]
    fig, axes = plt.subplots(1, len(states), figsize=(11, 2.7))
    for k, (ax, state) in enumerate(zip(axes, states)):
        ax.imshow(state, cmap="Blues", vmin=0, vmax=n + 1)
        for (r, b), count in np.ndenumerate(state):
            ax.text(b, r, "Σ" if count == n else str(count), ha="center", va="center", fontsize=8,
                    color="w" if count == n else "k")
        if k > 0:
            for r, block, _, _ in steps[k - 1]:  # the block each rank sent in this step
                ax.add_patch(plt.Rectangle((block - 0.5, r - 0.5), 1, 1, fill=False, ec="#d62728", lw=1.6))
        phase = "start" if k == 0 else (f"RS step {k}" if k < n else f"AG step {k - n + 1}")
        ax.set_title(phase, fontsize=9)
        ax.set_xticks(range(n), [f"b{b}" for b in range(n)], fontsize=7)
        ax.set_yticks(range(n), [f"r{r}" for r in range(n)] if k == 0 else [], fontsize=7)
    fig.suptitle(f"Ring all-reduce on {n} ranks: rows are ranks, columns blocks of 1/{n} of the buffer; "
                 "a cell counts the ranks summed into that copy (Σ: all);\n"
                 "red: the block the rank sent to rank + 1 in that step; RS: reduce-scatter, AG: all-gather "
                 "[s03 ring_all_reduce]", fontsize=9, x=0.01, ha="left")
    fig.tight_layout(rect=(0, 0, 1, 0.86))
    return save(fig, path)


if __name__ == "__main__":
    from course.figures._common import PNG_DIR

    print(draw(data(), PNG_DIR / "ring_steps.png"))
