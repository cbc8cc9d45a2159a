"""What the messages of the multi-rank tests must carry (shared by tests/ and hidden/, judge side).

Each rank gets only its own part of the test's data (ranks.run_each): its shard of every weight is
real and the other shards are noise, drawn by the judge from a seed no rank sees; a pipeline stage
gets its own layers, the first stage the inputs, the last the targets. Another rank's part is then
in no file, seed or test text a rank can read: it can only arrive in a message. So beside the
values and the counts, the tests check that each message a rank sent carried what the result
needs from that rank (its partial sum, its shard of the output, its activations or input
gradients), computed here from the judge's own draws. Messages of the right sizes that carry
other data (decoys beside a side channel such as the rendezvous store) fail.

Payloads are compared as sorted values with the test's tolerance, so any layout of the same
numbers (a transposed all-gather, a stacked all-reduce) passes.
"""

from __future__ import annotations

import secrets

import torch
import torch.nn.functional as F

# (layer key of a TP case, dim of its shard): the parts of a TP case that are each rank's own.
OWN_SHARDS = {"w1": 0, "b1": 0, "w2": 1, "emb": 0, "logits": -1}


def secret_generator() -> torch.Generator:
    """A generator seeded here in the judge with a seed no rank and no test file knows."""
    return torch.Generator().manual_seed(secrets.randbits(62))


def own_view(t: dict[str, torch.Tensor], world: int, r: int, g: torch.Generator) -> dict[str, torch.Tensor]:
    """Rank r's copy of TP case `t`: its shard r (of `world`) of each OWN_SHARDS tensor is real, the
    other shards are fresh noise of the same scale; the replicated inputs are whole."""
    view = dict(t)
    for key, dim in OWN_SHARDS.items():
        full = t[key]
        noise = torch.randn(full.shape, generator=g) * full.std()
        mine = torch.zeros(full.shape[dim], dtype=torch.bool)
        mine[torch.tensor_split(torch.arange(full.shape[dim]), world)[r]] = True
        shape = [1] * full.dim()
        shape[dim] = -1
        view[key] = torch.where(mine.view(shape), full, noise)
    return view


def same_values(got: torch.Tensor, want: torch.Tensor, close: dict) -> bool:
    """got holds want's numbers in any layout (sorted values equal within the tolerance)."""
    if got.numel() != want.numel():
        return False
    return torch.allclose(got.detach().float().flatten().sort().values, want.flatten().sort().values, **close)


def holds_values(got: list[torch.Tensor], want: torch.Tensor, close: dict) -> bool:
    """Every number of want is, within the tolerance, among the numbers of the tensors `got`."""
    if not got:
        return False
    pool = torch.cat([m.detach().float().flatten() for m in got])
    w = want.flatten()
    return bool(((pool[None, :] - w[:, None]).abs() <= close["atol"] + close["rtol"] * w.abs()[:, None]).any(1).all())


def shard(full: torch.Tensor, world: int, r: int, dim: int) -> torch.Tensor:
    return torch.tensor_split(full, world, dim=dim)[r]


def tp_messages(t: dict, world: int, r: int) -> dict[str, tuple[list, list]]:
    """Layer -> (forward, backward) list of (kind, [acceptable payloads]) for the rank holding
    shard r: what it must put into each collective. A row layer's bias may be added after the sum,
    on one rank before it, or split over the ranks before it."""
    w1, b1, w2 = shard(t["w1"], world, r, 0), shard(t["b1"], world, r, 0), shard(t["w2"], world, r, 1)
    b2 = t["b2"]

    def with_bias(partial):
        return [partial, partial + b2, partial + b2 / world]

    dx_col = F.linear(shard(t["dy1"], world, r, -1), w1.t())  # this rank's part of the input gradient
    row_partial = F.linear(shard(t["h"], world, r, -1), w2)
    x = t["x"].clone().requires_grad_()
    mlp_partial = F.linear(F.gelu(F.linear(x, w1, b1)), w2)
    mlp_partial.backward(t["dy2"])
    ids = t["ids"]
    start = sum(len(c) for c in torch.tensor_split(torch.arange(t["emb"].shape[0]), world)[:r])
    emb = shard(t["emb"], world, r, 0)
    held = (ids >= start) & (ids < start + emb.shape[0])
    lookup = torch.where(held[..., None], emb[(ids - start).clamp(0, emb.shape[0] - 1)], torch.zeros(()))
    ar, ag = "all_reduce", "all_gather"
    return {
        "column gather=False": ([], [(ar, [dx_col])]),
        "column gather=True": ([(ag, [F.linear(t["x"], w1, b1)])], [(ar, [dx_col])]),
        "row parallel_input=True": ([(ar, with_bias(row_partial))], []),
        "row parallel_input=False": ([(ar, with_bias(row_partial))], [(ag, [F.linear(t["dy2"], w2.t())])]),
        "mlp": ([(ar, with_bias(mlp_partial.detach()))], [(ar, [x.grad])]),
        "embedding": ([(ar, [lookup])], []),
    }


def check_tp_messages(got: dict, t: dict, world: int, r: int, rank: int, close: dict) -> None:
    """Each collective rank `rank` (shard r) joined carried its own contribution (tp_messages); the
    cross-entropy's all-reduces carry its row maxima and its sums of exp(logit - global max)."""
    if world == 1:
        return
    for name, phases in tp_messages(t, world, r).items():
        for phase, want in zip(("forward", "backward"), phases):
            sent = got[name]["fwd_msgs" if phase == "forward" else "bwd_msgs"]
            for k, (kind, accepted) in enumerate(want):
                data = [m["data"] for m in sent if m["kind"] == kind]
                ok = k < len(data) and any(same_values(data[k], a, close) for a in accepted)
                assert ok, (
                    f"rank {rank}, {name}, {phase}: its {kind.replace('_', '-')} did not carry this rank's own "
                    f"part ({tuple(accepted[0].shape)} values the judge computed from this rank's shard): a "
                    "collective must carry the data the result needs, not other data of the right size")
    logits = shard(t["logits"], world, r, -1)
    row_max = t["logits"].max(dim=-1).values
    sums = (logits - row_max[..., None]).exp().sum(-1)
    sent = got["cross entropy"]["fwd_msgs"]
    maxima = [m["data"] for m in sent if "MAX" in m["op"].upper()]
    assert any(same_values(m, logits.max(dim=-1).values, close) for m in maxima), (
        f"rank {rank}, cross entropy: no all-reduce with op=MAX carried this rank's row maxima (the max over its "
        "own logits, one per token)")
    assert holds_values([m["data"] for m in sent if "MAX" not in m["op"].upper()], sums, close), (
        f"rank {rank}, cross entropy: no sum all-reduce carried this rank's sums of exp(logit - global row max) "
        "(one per token, over its own logits)")


def stage_boundaries(weights, biases, x, y, m: int, p: int) -> tuple[list, list]:
    """acts[s][i]: stage s's output for micro-batch i; grads[s][i]: the gradient of the mean loss
    over the m micro-batches with respect to stage s's input (the one-process MLP, fp32)."""
    per = len(weights) // p
    acts, grads = [[] for _ in range(p)], [[] for _ in range(p)]
    for xi, yi in zip(x.chunk(m), y.chunk(m)):
        h, inputs = xi.clone().requires_grad_(), []
        for s in range(p):
            h.retain_grad()  # stage s's input: a leaf for stage 0, the previous stage's output after
            inputs.append(h)
            for k in range(s * per, (s + 1) * per):
                h = torch.tanh(F.linear(h, weights[k], biases[k]))
            acts[s].append(h.detach())
        (F.mse_loss(h, yi) / m).backward()
        for s in range(p):
            grads[s].append(inputs[s].grad)
    return acts, grads


def check_pipeline_messages(sent: list, expected: dict[int, tuple[str, list]], what: str, close: dict) -> None:
    """sent: this stage's send records; expected: peer rank -> (what it gets, the m tensors it must
    receive), one message each, in any order (forward: this stage's outputs to the next stage;
    backward: its input gradients to the previous one)."""
    for peer, (label, wants) in expected.items():
        to_peer = [msg["data"] for msg in sent if msg["peer"] == peer]
        matched = sorted(next((i for i, w in enumerate(wants) if same_values(d, w, close)), -1) for d in to_peer)
        assert matched == list(range(len(wants))), (
            f"{what}: the messages to rank {peer} carried micro-batches {matched} of the {len(wants)} {label} the "
            "judge computed for them (-1: data of no micro-batch): each message must carry this stage's output "
            "(forward) or input gradient (backward) for one micro-batch, not other data of the right size")
