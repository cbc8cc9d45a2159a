"""Programs the multi-rank tests run on every rank, and the judge-side checks of what the ranks
return (shared by tests/ and hidden/). A rank's results are its word: every value is checked here
against a one-process fp32 oracle computed in the judge.

Tensor parallelism: every layer of the package on this rank, from full-size weights and whole
inputs the judge made; the test slices the expected shards with torch.tensor_split (its own convention).
Pipeline: an MLP of 2p layers split over p stages, one training step under a schedule; a forward
hook records the order in which the stage ran forwards and backwards.
Collectives are counted per phase inside each rank (conftest.counting_collectives), and what each
rank put into them is checked against the judge's own computation (crossed.py): every rank gets
only its own shard of the weights (the others are noise) or its own stage, drawn from a seed no
rank sees, so what the result needs from another rank can only arrive in a message.
"""

from __future__ import annotations

from functools import partial

import pytest
import torch
import torch.nn.functional as F
from conftest import counting_collectives
from crossed import check_pipeline_messages, check_tp_messages, own_view, secret_generator, stage_boundaries
from parallel import (
    Action,
    ColumnParallelLinear,
    RowParallelLinear,
    VocabParallelEmbedding,
    afab_schedule,
    one_f_one_b_schedule,
    run_schedule,
    vocab_parallel_cross_entropy,
)


# ---- tensor parallelism -----------------------------------------------------------------------------
def make_case(vocab: int, tokens=(3, 5), d_in=16, d_hidden=24) -> dict[str, torch.Tensor]:
    """Full weights, inputs and upstream gradients of every layer under test, from a secret seed."""
    g = secret_generator()
    r = partial(torch.randn, generator=g)
    logits = r(*tokens, vocab) * 3
    logits[0, 0] += 100.0  # exp(100) overflows fp32: the row max must be taken over the whole vocabulary first
    return {
        "x": r(*tokens, d_in), "w1": r(d_hidden, d_in) / 4, "b1": r(d_hidden), "dy1": r(*tokens, d_hidden),
        "h": r(*tokens, d_hidden), "w2": r(d_in, d_hidden) / 5, "b2": r(d_in), "dy2": r(*tokens, d_in),
        "ids": torch.randint(0, vocab, tokens, generator=g), "emb": r(vocab, d_in), "demb": r(*tokens, d_in),
        "logits": logits, "target": torch.randint(0, vocab, tokens, generator=g), "dloss": r(*tokens),
    }


def my_group(groups: list[list[int]] | None):
    """(group, rank in it, its size): the whole world, or this rank's group among `groups` (every
    rank creates every group, in the same order)."""
    import torch.distributed as dist

    if groups is None:
        return None, dist.get_rank(), dist.get_world_size()
    mine = None
    for ranks in groups:
        g = dist.new_group(ranks)
        if dist.get_rank() in ranks:
            mine, index, size = g, ranks.index(dist.get_rank()), len(ranks)
    return mine, index, size


def shard_of(full: torch.Tensor, world: int, r: int, dim: int = -1) -> torch.Tensor:
    """Shard r of `full` over `world` ranks along `dim` (torch.tensor_split: the test's convention)."""
    return torch.tensor_split(full, world, dim=dim)[r].contiguous()


def run_phases(forward, grad: torch.Tensor) -> dict:
    """y = forward() and y.backward(grad), each under its own collective counter and recorder."""
    sent_fwd, sent_bwd = [], []
    with counting_collectives(messages=sent_fwd) as fwd:
        y = forward()
    with counting_collectives(messages=sent_bwd) as bwd:
        y.backward(grad)
    return dict(y=y.detach(), fwd=dict(fwd), bwd=dict(bwd), fwd_msgs=sent_fwd, bwd_msgs=sent_bwd)


def tp_on_rank(t: dict, groups: list[list[int]] | None) -> dict:
    """Every layer under test on this rank (t: its own view of the case, crossed.own_view): outputs,
    gradients, collective counts and what it put into each collective, per phase."""
    group, r, world = my_group(groups)
    out = {}
    for gather in (False, True):
        col = ColumnParallelLinear(t["w1"], t["b1"], gather_output=gather, group=group)
        x = t["x"].clone().requires_grad_()
        ran = run_phases(partial(col, x), t["dy1"] if gather else shard_of(t["dy1"], world, r))
        out[f"column gather={gather}"] = ran | dict(dx=x.grad, dw=col.weight.grad, db=col.bias.grad)
    for parallel_input in (True, False):
        row = RowParallelLinear(t["w2"], t["b2"], input_is_parallel=parallel_input, group=group)
        h = (shard_of(t["h"], world, r) if parallel_input else t["h"].clone()).requires_grad_()
        ran = run_phases(partial(row, h), t["dy2"])
        out[f"row parallel_input={parallel_input}"] = ran | dict(dx=h.grad, dw=row.weight.grad, db=row.bias.grad)
    col = ColumnParallelLinear(t["w1"], t["b1"], group=group)
    row = RowParallelLinear(t["w2"], t["b2"], group=group)
    x = t["x"].clone().requires_grad_()
    ran = run_phases(lambda: row(F.gelu(col(x))), t["dy2"])
    out["mlp"] = ran | dict(dx=x.grad, dw1=col.weight.grad, dw2=row.weight.grad)
    emb = VocabParallelEmbedding(t["emb"], group=group)
    out["embedding"] = run_phases(partial(emb, t["ids"]), t["demb"]) | dict(dw=emb.weight.grad)
    logits = shard_of(t["logits"], world, r).requires_grad_()
    loss = partial(vocab_parallel_cross_entropy, logits, t["target"], vocab_size=t["logits"].shape[-1], group=group)
    out["cross entropy"] = run_phases(loss, t["dloss"]) | dict(dlogits=logits.grad)
    return out


def run_tp(ranks, t: dict, groups: list[list[int]] | None, world: int, rank_in_group) -> list[dict]:
    """tp_on_rank on every rank, each given its own view of case t (its shard real, the rest noise)."""
    g = secret_generator()
    return ranks.run_each(tp_on_rank, [own_view(t, world, rank_in_group(r), g) for r in range(ranks.world)], groups)


def expected(t: dict) -> dict:
    """The same layers in one process, fp32 (the oracle)."""
    x, w1, b1, h, w2, b2, emb, logits = (t[k].clone().requires_grad_()
                                         for k in ("x", "w1", "b1", "h", "w2", "b2", "emb", "logits"))
    out = {}
    y1 = F.linear(x, w1, b1)
    y1.backward(t["dy1"])
    out["column"] = dict(y=y1.detach(), dx=x.grad.clone(), dw=w1.grad.clone(), db=b1.grad.clone())
    y2 = F.linear(h, w2, b2)
    y2.backward(t["dy2"])
    out["row"] = dict(y=y2.detach(), dx=h.grad.clone(), dw=w2.grad.clone(), db=b2.grad.clone())
    x.grad, w1.grad, w2.grad = None, None, None
    y3 = F.linear(F.gelu(F.linear(x, w1, b1)), w2, b2)
    y3.backward(t["dy2"])
    out["mlp"] = dict(y=y3.detach(), dx=x.grad, dw1=w1.grad, dw2=w2.grad)
    y4 = F.embedding(t["ids"], emb)
    y4.backward(t["demb"])
    out["embedding"] = dict(y=y4.detach(), dw=emb.grad)
    y5 = F.cross_entropy(logits.flatten(0, -2), t["target"].flatten(), reduction="none").view(t["target"].shape)
    y5.backward(t["dloss"])
    out["cross entropy"] = dict(y=y5.detach(), dlogits=logits.grad)
    return out


AR1 = {"all_reduce": 1}
COUNTS = {  # layer -> (forward, backward) collectives
    "column gather=False": ({}, AR1), "column gather=True": ({"all_gather": 1}, AR1),
    "row parallel_input=True": (AR1, {}), "row parallel_input=False": (AR1, {"all_gather": 1}),
    "mlp": (AR1, AR1), "embedding": (AR1, {}),
}


def check_ranks(results: list[dict], t: dict, world: int, rank_in_group, tol) -> None:
    ref = expected(t)
    close = tol("tensor parallel vs one process, fp32")
    for rank, got in enumerate(results):
        r = rank_in_group(rank)

        def part(full, dim=-1, r=r):
            return shard_of(full, world, r, dim)

        def same(name, key, actual, want, rank=rank):
            torch.testing.assert_close(actual, want, **close, msg=lambda s: f"rank {rank}, {name}, {key}: {s}")

        for gather in (False, True):
            name, c = f"column gather={gather}", ref["column"]
            same(name, "output", got[name]["y"], c["y"] if gather else part(c["y"]))
            same(name, "input grad (all-reduced over the group)", got[name]["dx"], c["dx"])
            same(name, "weight grad", got[name]["dw"], part(c["dw"], 0))
            same(name, "bias grad", got[name]["db"], part(c["db"], 0))
        for parallel_input in (True, False):
            name, c = f"row parallel_input={parallel_input}", ref["row"]
            same(name, "output", got[name]["y"], c["y"])
            same(name, "input grad", got[name]["dx"], part(c["dx"]) if parallel_input else c["dx"])
            same(name, "weight grad", got[name]["dw"], part(c["dw"], 1))
            same(name, "bias grad", got[name]["db"], c["db"])
        c = ref["mlp"]
        for key, want in (("y", c["y"]), ("dx", c["dx"]), ("dw1", part(c["dw1"], 0)), ("dw2", part(c["dw2"], 1))):
            same("mlp", key, got["mlp"][key], want)
        same("embedding", "output", got["embedding"]["y"], ref["embedding"]["y"])
        same("embedding", "weight grad", got["embedding"]["dw"], part(ref["embedding"]["dw"], 0))
        same("cross entropy", "losses", got["cross entropy"]["y"], ref["cross entropy"]["y"])
        same("cross entropy", "logits grad", got["cross entropy"]["dlogits"], part(ref["cross entropy"]["dlogits"]))
        for name, (fwd, bwd) in COUNTS.items():
            assert (got[name]["fwd"], got[name]["bwd"]) == (fwd, bwd), \
                f"rank {rank}, {name}: collectives (forward, backward) {got[name]['fwd']}, {got[name]['bwd']}; want {fwd}, {bwd}"
        fwd, bwd = got["cross entropy"]["fwd"], got["cross entropy"]["bwd"]
        assert set(fwd) == {"all_reduce"} and 2 <= fwd["all_reduce"] <= 3 and bwd == {}, \
            f"rank {rank}, cross entropy: collectives {fwd}, {bwd}; want 2-3 all-reduces forward (max, then sums), none backward"
        check_tp_messages(got, t, world, r, rank, close)



# ---- pipeline -----------------------------------------------------------------------------------------
WIDTH, MICRO = 8, 2  # features; rows per micro-batch


def pipeline_case(num_layers: int, micro_batches: int):
    """(weights, biases, x, y) of an MLP of num_layers layers and its data, from a secret seed."""
    g = secret_generator()
    weights = [torch.randn(WIDTH, WIDTH, generator=g) / WIDTH**0.5 for _ in range(num_layers)]
    biases = [torch.randn(WIDTH, generator=g) * 0.1 for _ in range(num_layers)]
    x, y = torch.randn(micro_batches * MICRO, WIDTH, generator=g), torch.randn(micro_batches * MICRO, WIDTH, generator=g)
    return weights, biases, x, y


def one_process(weights, biases, x, y, m):
    """Gradients of every weight and bias (layer order) and the m micro-batch losses."""
    params = [t.clone().requires_grad_() for pair in zip(weights, biases) for t in pair]
    losses = []
    for xi, yi in zip(x.chunk(m), y.chunk(m)):
        h = xi
        for k in range(0, len(params), 2):
            h = torch.tanh(F.linear(h, params[k], params[k + 1]))
        losses.append(F.mse_loss(h, yi))
    (sum(losses) / m).backward()
    return [p.grad for p in params], [loss.item() for loss in losses]


def build_stage(weights, biases, events: list[str]):
    """A stage's layers (two Linear + tanh per stage) with a hook recording "F" at each forward
    and "B" when the gradient of that forward's output arrives."""
    from torch import nn

    layers = []
    for w, b in zip(weights, biases):
        lin = nn.Linear(WIDTH, WIDTH)
        with torch.no_grad():
            lin.weight.copy_(w)
            lin.bias.copy_(b)
        layers += [lin, nn.Tanh()]
    module = nn.Sequential(*layers)

    def on_forward(module, inputs, out):
        events.append("F")
        out.register_hook(lambda grad: events.append("B"))

    module.register_forward_hook(on_forward)
    return module


def stage_of(rank: int, order: list[int] | None) -> int:
    return order.index(rank) if order is not None else rank


def pipeline_on_rank(mine: list[dict], runs):
    """Each run (schedule source "1f1b" or "afab", m, hand-written rows or None, stage_ranks or
    None) on this rank, from mine[run]: its stage's layers, and the inputs (first stage) or targets
    (last stage). Returns its stage's gradients, losses, the order it ran, its point-to-point calls
    and a copy of each message it sent."""
    import torch.distributed as dist

    rank, p = dist.get_rank(), dist.get_world_size()
    results = []
    for own, (source, m, hand, order) in zip(mine, runs):
        stage = stage_of(rank, order)
        events: list[str] = []
        module = build_stage(own["weights"], own["biases"], events)
        if hand is not None:
            actions = [Action(tok[0], int(tok[1:])) for tok in hand[stage].split()]
        else:
            actions = (one_f_one_b_schedule if source == "1f1b" else afab_schedule)(p, m)[stage]
        sent: list = []
        with counting_collectives(messages=sent) as counts:
            losses = run_schedule(module, actions, stage=stage, num_stages=p,
                                  # every micro-batch of x and y, often more than the m it runs
                                  inputs=own["x"], targets=own["y"],
                                  loss_fn=F.mse_loss, activation_shape=(MICRO, WIDTH), stage_ranks=order)
        results.append({"stage": stage, "grads": [prm.grad for prm in module.parameters()], "losses": losses,
                        "events": "".join(events), "ran": "".join(a.kind for a in actions),
                        "counts": dict(counts), "sent": [m for m in sent if m["kind"] == "send"]})
    return results


def run_pipeline(ranks, weights, biases, x, y, runs) -> list:
    """pipeline_on_rank on every rank, each given only its own stage's layers of each run, the
    micro-batches of x if it is the first stage and of y if it is the last."""
    p, per = ranks.world, len(weights) // ranks.world
    mine = [[{"weights": weights[s * per:(s + 1) * per], "biases": biases[s * per:(s + 1) * per],
              "x": list(x.split(MICRO)) if s == 0 else None, "y": list(y.split(MICRO)) if s == p - 1 else None}
             for s in (stage_of(rank, order) for _, _, _, order in runs)] for rank in range(p)]
    return ranks.run_each(pipeline_on_rank, mine, runs)


def check_pipeline(results, runs, weights, biases, x, y, tol):
    p = len(results)
    per = len(weights) // p
    for run_index, (source, m, hand, order) in enumerate(runs):
        grads, losses = one_process(weights, biases, x[: m * MICRO], y[: m * MICRO], m)
        acts, in_grads = stage_boundaries(weights, biases, x[: m * MICRO], y[: m * MICRO], m, p)
        for rank, per_run in enumerate(results):
            got = per_run[run_index]
            stage = stage_of(rank, order)
            what = f"{source if hand is None else 'hand-written'} schedule, p={p}, m={m}, stage {stage} on rank {rank}"
            assert got["stage"] == stage
            if hand is not None:
                assert got["ran"] == "".join(tok[0] for tok in hand[stage].split())
            assert got["events"] == got["ran"], f"{what}: ran {got['events']!r}, the schedule says {got['ran']!r}"
            assert all(g is not None for g in got["grads"]), f"{what}: a parameter got no gradient"
            for k, g in enumerate(got["grads"]):
                torch.testing.assert_close(g, grads[2 * per * stage + k], **tol("pipeline vs one process, fp32"),
                                           msg=lambda s, what=what, k=k: f"{what}, parameter {k}: {s}")
            if stage == p - 1:
                assert got["losses"] == pytest.approx(losses, rel=1e-5), f"{what}: losses"  # fp32 MSE of 16 numbers
            else:
                assert got["losses"] == [], f"{what}: only the last stage returns losses"
            counts = got["counts"]
            assert set(counts) <= {"send", "recv", "batch_isend_irecv"}, f"{what}: collectives {counts} (a pipeline needs none)"
            if "batch_isend_irecv" not in counts:
                neighbours = (stage > 0) + (stage < p - 1)
                assert counts.get("send", 0) == counts.get("recv", 0) == m * neighbours, \
                    f"{what}: {counts} (one message per micro-batch, neighbour and direction)"
            placed = list(order) if order is not None else list(range(p))
            wants = {}
            if stage < p - 1:
                wants[placed[stage + 1]] = ("outputs", acts[stage])
            if stage > 0:
                wants[placed[stage - 1]] = ("input gradients", in_grads[stage])
            check_pipeline_messages(got["sent"], wants, what, tol("pipeline vs one process, fp32"))
