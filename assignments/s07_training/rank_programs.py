"""Programs the multi-rank tests run on every rank, and the one-process oracles the judge computes
(shared by tests/ and hidden/). What a rank returns is its word: every value is checked in the
judge against a one-process fp32 (or bf16) run of the same model on the same global batches.

The model, Net: four linear layers registered in an order (head first) that differs from the order
the forward pass uses them (l0, l1, extra, head), so that the order in which backward makes
gradients ready is not reverse registration order; `extra` runs only when the rank's flag says so,
which makes its parameters unused on the other ranks.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from trainfw import DDP, LoopState, ZeroAdam, load_resharded, next_batch, save_shard

D_IN, D_HID, D_OUT = 6, 16, 3


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.head = nn.Linear(D_HID, D_OUT)  # registered first, used last
        self.l0 = nn.Linear(D_IN, D_HID)
        self.l1 = nn.Linear(D_HID, D_HID)
        self.extra = nn.Linear(D_HID, D_HID)

    def forward(self, x: torch.Tensor, use_extra: bool = True) -> torch.Tensor:
        h = torch.tanh(self.l1(torch.tanh(self.l0(x))))
        if use_extra:
            h = h + torch.tanh(self.extra(h))
        return self.head(h)


def make_net(weights: list[torch.Tensor] | None, dtype=torch.float32) -> Net:
    """Net with the given parameters (registration order) or, for None, noise from this process's
    RNG (a rank that must start from rank 0's weights)."""
    net = Net()
    if weights is not None:
        with torch.no_grad():
            for p, w in zip(net.parameters(), weights):
                p.copy_(w)
    return net.to(dtype)


def draw_case(seed: int, steps: int, batch: int, samples: int = 64) -> dict:
    """Weights, a dataset, and per step the global batch's rows (the judge's draws)."""
    g = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    weights = [p.detach().clone() for p in Net().parameters()]
    x, y = torch.randn(samples, D_IN, generator=g), torch.randn(samples, D_OUT, generator=g)
    rows = [torch.randint(samples, (batch,), generator=g) for _ in range(steps)]
    return {"seed": seed, "weights": weights, "x": x, "y": y, "rows": rows}


# ---------------------------------------------------------------- one process (the oracles)

def one_process_sgd(case: dict, world: int, flags: list[bool], lr: float, dtype=torch.float32) -> list[list]:
    """Parameters after each SGD step of one process on the whole global batch: the loss is the
    mean over ranks of each rank's mean-squared error on its slice (with its own flag)."""
    net = make_net(case["weights"], dtype)
    out = []
    for rows in case["rows"]:
        losses = [F.mse_loss(net(case["x"][r].to(dtype), flags[k]), case["y"][r].to(dtype))
                  for k, r in enumerate(rows.chunk(world))]
        net.zero_grad()
        (sum(losses) / world).backward()
        with torch.no_grad():
            for p in net.parameters():
                if p.grad is not None:  # unused everywhere: unchanged (DDP averages zeros)
                    p -= lr * p.grad
        out.append([p.detach().float().clone() for p in net.parameters()])
    return out


def one_process_adam(case: dict, lr: float) -> list[list]:
    """Parameters after each step of torch.optim.Adam on the whole global batch (fp32)."""
    net = make_net(case["weights"])
    opt = torch.optim.Adam(net.parameters(), lr=lr, foreach=False)
    out = []
    for rows in case["rows"]:
        opt.zero_grad()
        F.mse_loss(net(case["x"][rows]), case["y"][rows]).backward()
        opt.step()
        out.append([p.detach().clone() for p in net.parameters()])
    return out


def one_process_grads(case: dict, lr: float) -> list[torch.Tensor]:
    """The flat gradient (registration order) of each step of one_process_adam's run."""
    net = make_net(case["weights"])
    opt = torch.optim.Adam(net.parameters(), lr=lr, foreach=False)
    out = []
    for rows in case["rows"]:
        opt.zero_grad()
        F.mse_loss(net(case["x"][rows]), case["y"][rows]).backward()
        out.append(torch.cat([p.grad.reshape(-1) for p in net.parameters()]))
        opt.step()
    return out


# ---------------------------------------------------------------- on every rank

def ddp_on_rank(case: dict, flags: list[bool], cap: int, lr: float, dtype_name: str) -> dict:
    """SGD steps under the package's DDP. Records, per step, the test's own events: ("grad", i)
    when parameter i's gradient is computed, ("all_reduce", numel, async_op) and ("wait",) from a
    spy on torch.distributed.all_reduce and the works it returns."""
    import torch.distributed as dist
    from conftest import spying_all_reduce

    rank, world = dist.get_rank(), dist.get_world_size()
    dtype = getattr(torch, dtype_name)
    net = make_net(case["weights"] if rank == 0 else None, dtype)
    params = list(net.parameters())
    events: list = []
    for i, p in enumerate(params):
        p.register_hook(lambda g, i=i: events.append(("grad", i)))
    model = DDP(net, bucket_cap_bytes=cap)
    out = {"buckets": [[list(b) for b in model.buckets]], "events": [], "ready": [], "params": []}
    with spying_all_reduce(events):
        for rows in case["rows"]:
            mine = rows.chunk(world)[rank]
            events.clear()
            loss = F.mse_loss(model(case["x"][mine].to(dtype), flags[rank]), case["y"][mine].to(dtype))
            loss.backward()
            events.append(("backward_done",))
            model.finish_gradient_sync()
            out["events"].append(list(events))
            out["ready"].append([e[1] for e in events if e[0] == "grad"])
            with torch.no_grad():
                for p in params:
                    p -= lr * p.grad
                    p.grad = None
            out["params"].append([p.detach().float().clone() for p in params])
            out["buckets"].append([list(b) for b in model.buckets])
    return out


def zero_on_rank(case: dict, stages: list[int], lr: float) -> list[dict]:
    """Adam steps under ZeroAdam at each stage: whole parameters and this rank's averaged gradient
    shard after each step, what the rank holds (its own report and what the test sees), and its
    shard bounds."""
    import torch.distributed as dist

    rank, world = dist.get_rank(), dist.get_world_size()
    results = []
    for stage in stages:
        net = make_net(case["weights"] if rank == 0 else None)
        opt = ZeroAdam(net, stage=stage, lr=lr)
        steps, grads = [], []
        for rows in case["rows"]:
            mine = rows.chunk(world)[rank]
            opt.gather_parameters()
            F.mse_loss(net(case["x"][mine]), case["y"][mine]).backward()
            opt.step()
            if stage == 1:  # the whole averaged gradient stays in the .grads: take this rank's part
                grads.append(torch.cat([p.grad.reshape(-1) for p in net.parameters()])[opt.start:opt.end].clone())
            else:
                grads.append(opt.grad_shard.clone())
            steps.append(opt.full_parameters())
        held = opt.held_bytes()
        results.append({
            "stage": stage, "params": steps, "grads": grads, "bounds": (opt.start, opt.end),
            "held": {"params": held.params, "grads": held.grads, "optimizer": held.optimizer},
            "module_numel": sum(p.numel() for p in net.parameters()),
            "module_grads": sum(p.grad.numel() for p in net.parameters() if p.grad is not None),
            "moments_numel": opt.exp_avg.numel() + opt.exp_avg_sq.numel(),
        })
    return results


def _train(net, opt, loop, case, global_batch: int, steps: int, rank: int, world: int) -> None:
    for _ in range(steps):
        x, y = next_batch(loop, case["x"], case["y"], global_batch, rank, world)
        opt.gather_parameters()
        F.mse_loss(net(x), y).backward()
        opt.step()


def checkpoint_save_on_rank(case: dict, stage: int, lr: float, global_batch: int, before: int, after: int) -> dict:
    """Train `before` steps, save this rank's shard, train `after` more (the uninterrupted run)."""
    import torch.distributed as dist

    rank, world = dist.get_rank(), dist.get_world_size()
    net = make_net(case["weights"] if rank == 0 else None)
    opt = ZeroAdam(net, stage=stage, lr=lr)
    loop = LoopState.start(case["seed"])
    _train(net, opt, loop, case, global_batch, before, rank, world)
    shard = save_shard(opt, loop)
    _train(net, opt, loop, case, global_batch, after, rank, world)
    return {"shard": shard, "final": opt.full_parameters()}


def checkpoint_resume_on_rank(shards: list[dict], case: dict, stage: int, lr: float, global_batch: int,
                              steps: int, sub: int) -> dict:
    """Load every saved shard on all ranks and train `steps` more; then on ranks 0..sub-1 alone (a
    group of `sub`) load them again and train the same steps. Fresh noise weights before each load."""
    import torch.distributed as dist

    rank, world = dist.get_rank(), dist.get_world_size()
    out = {}
    net = make_net(None)
    opt = ZeroAdam(net, stage=stage, lr=lr)
    loop = load_resharded(opt, shards)
    _train(net, opt, loop, case, global_batch, steps, rank, world)
    out["same_world"] = opt.full_parameters()
    group = dist.new_group(list(range(sub)))
    if rank < sub:
        net = make_net(None)
        opt = ZeroAdam(net, stage=stage, lr=lr, group=group)
        loop = load_resharded(opt, shards)
        if stage < 3:  # the module must hold the loaded weights before any gather
            out["loaded"] = [p.detach().clone() for p in net.parameters()]
        _train(net, opt, loop, case, global_batch, steps, rank, sub)
        out["resharded"] = opt.full_parameters()
        out["bounds"] = (opt.start, opt.end)
    dist.barrier()
    return out
