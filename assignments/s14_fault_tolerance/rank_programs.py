"""Programs the multi-rank test runs on every rank (data parallel: each rank holds the whole model
and takes its slice of the global batch; gradients averaged by all-reduce). What a rank returns is
its word: the judge checks its checkpoint folders on disk itself and compares the final weights with
a one-process run of the same global batches (programs.oracle's data and order)."""

from __future__ import annotations

import os
import random
import time
from pathlib import Path

import torch
import torch.distributed as dist
import torch.nn.functional as F

from faulttol import (ResumableLoader, capture_training_state, commit_checkpoint, common_resume_step, decode,
                      encode, find_stragglers, gather_step_times, read_checkpoint, restore_training_state, step_dir)
from programs import BATCH, SAMPLES, data, fresh

BASE_S, SLOW_S = 0.02, 0.06  # every rank's compute lasts at least BASE_S (a sleep: no CPU, so two cores shared by
                             # three ranks add little noise); the slowed rank's lasts SLOW_S longer


def checkpoint_root() -> Path:
    """This rank's checkpoint folder, in its own TMPDIR (the only place a rank may write)."""
    return Path(os.environ["TMPDIR"]) / "ckpt"


def ddp_step(net, opt, sched, x, y, idx: list[int], group, slow: bool = False) -> float:
    """One data-parallel step on this rank's slice of `idx`; returns its compute time (seconds)."""
    rank, world = dist.get_rank(group), dist.get_world_size(group)
    per = len(idx) // world
    noise = random.random() * 0.1  # every rank draws the same (same seed): programs.step's noise
    start = time.perf_counter()
    loss = F.mse_loss(net(x[idx[rank * per:(rank + 1) * per]] + noise), y[idx[rank * per:(rank + 1) * per]])
    opt.zero_grad()
    loss.backward()
    time.sleep(BASE_S + (SLOW_S if slow else 0.0))
    seconds = time.perf_counter() - start
    for p in net.parameters():
        dist.all_reduce(p.grad, group=group)
        p.grad /= world
    opt.step()
    sched.step()
    return seconds


def train_and_checkpoint(slow: bool, seed: int, steps: int, every: int) -> dict:
    """Train `steps` steps on every rank (one of them slowed, which only it knows), committing this
    rank's full state every `every` steps; the ranks every rank names as stragglers."""
    torch.set_num_threads(1)
    x, y = data(seed)
    net, opt, sched = fresh(seed, dropout=0.0)
    loader, times = ResumableLoader(SAMPLES, BATCH, seed), []
    for k in range(1, steps + 1):
        times.append(gather_step_times(ddp_step(net, opt, sched, x, y, loader.next_indices(), None, slow)))
        if k % every == 0:
            commit_checkpoint(checkpoint_root(), k, {"state.pt": encode(capture_training_state(net, opt, sched, loader, k))})
    return {"stragglers": find_stragglers(times), "times": times}


def resume_on_survivors(survivors: list[int], seed: int, steps: int) -> dict:
    """The survivors form a new group, agree on the step to resume from, load their own checkpoint
    of it (after seeding everything differently, as a fresh process would be) and train to `steps`."""
    torch.set_num_threads(1)
    group = dist.new_group(survivors)
    out = {}
    if dist.get_rank() in survivors:
        x, y = data(seed)
        resume = common_resume_step(checkpoint_root(), group)
        net, opt, sched = fresh(seed + 1000 + dist.get_rank(), dropout=0.0)
        loader = ResumableLoader(SAMPLES, BATCH, seed)
        done = restore_training_state(decode(read_checkpoint(step_dir(checkpoint_root(), resume))[1]["state.pt"]),
                                      net, opt, sched, loader)
        ran = []
        while done < steps:
            ddp_step(net, opt, sched, x, y, loader.next_indices(), group)
            done += 1
            ran.append(done)
        out = {"resume": resume, "ran": ran, "final": [p.detach().clone() for p in net.parameters()]}
    dist.barrier()
    return out
