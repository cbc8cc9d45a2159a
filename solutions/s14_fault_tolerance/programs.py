"""The training program the tests run (in the submission's process, or on every rank) and the
judge's own oracle of it. What the submission's process returns is its word: the judge compares it
with an uninterrupted run it computes itself, with its own copy of the loader's order (the
handout's contract), and reads the checkpoint files on disk itself.

The step draws from every source a resume must restore: dropout (torch's generator), a noise scale
(Python's random), the loader's shuffled order (epoch permutations), AdamW's moments and step count,
and a LambdaLR schedule (warm-up, then decay).
"""

from __future__ import annotations

import os
import random
import signal

import torch
import torch.nn.functional as F
from torch import nn

D_IN, D_HID, D_OUT, SAMPLES, BATCH = 8, 48, 4, 40, 6  # 6 batches an epoch (4 samples dropped)


class Net(nn.Module):
    def __init__(self, dropout: float) -> None:
        super().__init__()
        self.l0, self.drop, self.l1 = nn.Linear(D_IN, D_HID), nn.Dropout(dropout), nn.Linear(D_HID, D_OUT)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.l1(self.drop(torch.tanh(self.l0(x))))


def schedule(step: int) -> float:
    """LR factor: linear warm-up over 4 steps, then x0.8 every 3 steps."""
    return min(1.0, (step + 1) / 4) * 0.8 ** (step // 3)


class Killed(BaseException):
    """Stands for SIGKILL where the program runs in the judge's own process (plain pytest)."""


def die() -> None:
    """The fault the judge arms: SIGKILL of this very process, in the middle of a step."""
    from autograder.testing import in_the_worker

    if in_the_worker():
        os.kill(os.getpid(), signal.SIGKILL)
    raise Killed("killed")


def data(seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(SAMPLES, D_IN, generator=g), torch.randn(SAMPLES, D_OUT, generator=g)


def fresh(seed: int, dropout: float = 0.25) -> tuple:
    """(net, optimizer, scheduler): both generators seeded with `seed` first."""
    torch.manual_seed(seed)
    random.seed(seed)
    net = Net(dropout)
    opt = torch.optim.AdamW(net.parameters(), lr=0.02, weight_decay=0.01, foreach=False)
    return net, opt, torch.optim.lr_scheduler.LambdaLR(opt, schedule)


def step(net, opt, sched, x, y, idx: list[int], kill: bool = False) -> None:
    """One training step on rows `idx`; `kill` dies after the backward, before the update."""
    noise = random.random() * 0.1
    loss = F.mse_loss(net(x[idx] + noise), y[idx])
    opt.zero_grad()
    loss.backward()
    if kill:
        die()
    opt.step()
    sched.step()


def judge_order(seed: int, steps: int) -> list[list[int]]:
    """The loader's batches, from the handout's contract (the judge's copy): per epoch e,
    torch.randperm(SAMPLES) seeded seed + e, cut into BATCH-sized batches, the rest dropped."""
    out, epoch = [], 0
    while len(out) < steps:
        perm = torch.randperm(SAMPLES, generator=torch.Generator().manual_seed(seed + epoch)).tolist()
        out += [perm[i:i + BATCH] for i in range(0, SAMPLES - BATCH + 1, BATCH)]
        epoch += 1
    return out[:steps]


def oracle(seed: int, steps: int, keep: tuple[int, ...] = (), dropout: float = 0.25) -> dict:
    """The uninterrupted run in this process: {"final": parameters, step k: (model, optimizer)
    state dicts after step k for k in keep}."""
    x, y = data(seed)
    net, opt, sched = fresh(seed, dropout)
    out = {}
    for k, idx in enumerate(judge_order(seed, steps), start=1):
        step(net, opt, sched, x, y, idx)
        if k in keep:
            out[k] = {"model": {n: t.clone() for n, t in net.state_dict().items()},
                      "optimizer": {i: {n: (v.clone() if torch.is_tensor(v) else v) for n, v in s.items()}
                                    for i, s in opt.state_dict()["state"].items()}}
    out["final"] = [p.detach().clone() for p in net.parameters()]
    return out
