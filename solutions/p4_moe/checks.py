"""Judge-side halves of the multi-rank tests (shared by tests/ and hidden/): the secret inputs, one
rank's share each, and the checks of every rank's results against the judge's own computation.

Tags: rank r's token t carries (r * 1000 + t) * 10 in column 0 (+ the column index in the others),
exact in fp32, so a misrouted row names its source: "rank 2's token 5"."""

from __future__ import annotations

import secrets

import torch
from conftest import block_oracle, deepseek_moe, expected_dispatch, shard


def secret_generator() -> torch.Generator:
    """Draws no rank can repeat (not the test's seed, which the ranks know)."""
    return torch.Generator().manual_seed(secrets.randbits(62))


def tagged_tokens(rank: int, tokens: int, width: int) -> torch.Tensor:
    return ((rank * 1000 + torch.arange(tokens, dtype=torch.float32)) * 10)[:, None] + torch.arange(width)


def name_row(value: float) -> str:
    tag = int(value) // 10
    return f"rank {tag // 1000}'s token {tag % 1000}"


def draw_dispatch(case: dict, g: torch.Generator) -> list[dict]:
    """Per rank: tagged x (T_r, H), physical slots (T_r, k) (distinct within a token, each a
    replica of a distinct expert), gate weights (T_r, k) summing to 1 over a token."""
    per_rank, top_k = len(case["slots"][0]), case["top_k"]
    total = per_rank * len(case["slots"])
    replicas = {}
    for p in range(total):
        replicas.setdefault(case["slots"][p // per_rank][p % per_rank], []).append(p)
    mine = []
    for rank, tokens in enumerate(case["tokens"]):
        experts = torch.stack([torch.randperm(case["num_experts"], generator=g)[:top_k] for _ in range(tokens)]) \
            if tokens else torch.zeros(0, top_k, dtype=torch.int64)
        slots = torch.tensor([[replicas[int(e)][int(torch.randint(len(replicas[int(e)]), (1,), generator=g))]
                               for e in row] for row in experts], dtype=torch.int64).reshape(tokens, top_k)
        w = torch.rand(tokens, top_k, generator=g) + 0.1
        mine.append({"x": tagged_tokens(rank, tokens, case["width"]), "slots": slots, "weights": w / w.sum(-1, keepdim=True)})
    return mine


def check_dispatch(results: list[dict], inputs: list[dict], case: dict, tol, where: str) -> None:
    """Every rank's received rows, slots and counts exactly; combine of identity experts gives back
    x; combine of rows tagged with their physical slot gives sum_c w[t, c] (x[t] + 1e4 slot[t, c])."""
    per_rank = len(case["slots"][0])
    xs, slots = [i["x"] for i in inputs], [i["slots"] for i in inputs]
    for rank, res in enumerate(results):
        rows, local, counts = expected_dispatch(xs, slots, per_rank, rank)
        sends = [int(((slots[rank] // per_rank) == d).sum()) for d in range(len(results))]
        at = f"{where}: rank {rank}"
        assert res["send_counts"] == sends, f"{at}: send_counts {res['send_counts']}, its slots send {sends}"
        assert res["recv_counts"] == counts, f"{at}: recv_counts {res['recv_counts']}, the other ranks send it {counts}"
        got = res["rows"]
        assert tuple(got.shape) == tuple(rows.shape), f"{at}: received {tuple(got.shape)} rows, want {tuple(rows.shape)}"
        bad = (got[:, 0] != rows[:, 0]).nonzero().flatten()
        assert len(bad) == 0, (f"{at}: received row {int(bad[0])} is {name_row(float(got[bad[0], 0]))}, want "
                               f"{name_row(float(rows[bad[0], 0]))} ({len(bad)} of {len(rows)} rows out of place; "
                               f"order: source rank, then slot, then token, then choice)")
        assert torch.equal(got, rows), f"{at}: the rows' tags are in place but other columns differ"
        assert torch.equal(res["recv_slots"].long(), local), (
            f"{at}: local slots {res['recv_slots'].tolist()[:12]}..., want {local.tolist()[:12]}...")
        x = inputs[rank]["x"]
        torch.testing.assert_close(res["identity"], x, **tol("combine, fp32"),
                                   msg=lambda m, at=at: f"{at}: combine(dispatch(x)) with identity experts: {m}")
        w, s = inputs[rank]["weights"], slots[rank].float()
        want = (w[:, :, None] * (x[:, None, :] + 1e4 * s[:, :, None])).sum(1)
        torch.testing.assert_close(res["tagged"], want, **tol("combine, fp32"),
                                   msg=lambda m, at=at: f"{at}: combine of rows tagged with their slot "
                                   f"(a row returned to the wrong (token, choice) shows here): {m}")


def check_counts_first(results: list[dict], where: str) -> None:
    """dispatch's first all_to_all_single carries the send counts (world int64 values)."""
    for rank, res in enumerate(results):
        calls = res["calls"]
        assert calls, f"{where}: rank {rank} made no all_to_all_single call in dispatch"
        first = calls[0]["input"]
        assert first.dtype == torch.int64 and first.tolist() == res["send_counts"], (
            f"{where}: rank {rank}'s first all_to_all_single sent {tuple(first.shape)} {first.dtype}, not its "
            f"{len(res['send_counts'])} send counts: exchange the counts before the rows")


def moe_case(cfg: dict, slots: tuple, tokens: list[int], seed: int, kind: str = "ep", lengths=None, **extra):
    """(case for moe_on_rank, per-rank inputs, the whole-run oracle output per rank)."""
    gate = {k: cfg[k] for k in ("num_experts", "top_k", "n_group", "topk_group", "routed_scaling_factor",
                                "norm_topk_prob")}
    moe, params = deepseek_moe(gate, cfg["hidden"], seed)
    g = secret_generator()
    case = {"kind": kind, "cfg": cfg, "slots": slots, **extra}
    if kind == "ep":
        xs = [torch.randn(t, cfg["hidden"], generator=g) for t in tokens]
        from conftest import hf_moe

        want = [hf_moe(moe, x) if len(x) else torch.zeros(0, cfg["hidden"]) for x in xs]
        inputs = [{"x": x, "params": shard(params, slots[r])} for r, x in enumerate(xs)]
        return case, inputs, want
    from conftest import block_params

    bp = block_params(cfg["hidden"], seed + 1)
    reqs = [[torch.randn(n, cfg["hidden"], generator=g) for n in per_rank] for per_rank in lengths]
    want = [block_oracle(r, bp, moe, cfg["num_heads"]) for r in reqs]
    inputs = [{"requests": r, "params": {**bp, **shard(params, slots[i])}} for i, r in enumerate(reqs)]
    return case, inputs, want


def check_moe(results: list, want: list, case: dict, tol, where: str) -> None:
    for rank, (got, exp) in enumerate(zip(results, want)):
        at = f"{where}: rank {rank}"
        if case["kind"] == "ep":
            assert tuple(got.shape) == tuple(exp.shape), f"{at}: output {tuple(got.shape)}, want {tuple(exp.shape)}"
            torch.testing.assert_close(got, exp, **tol("MoE layer, fp32"),
                                       msg=lambda m, at=at: f"{at}: EP layer against the dense MoE on one process: {m}")
            continue
        assert isinstance(got, list) and len(got) == len(exp), (
            f"{at}: {len(got) if isinstance(got, list) else type(got).__name__} outputs for {len(exp)} requests")
        for i, (g_i, e_i) in enumerate(zip(got, exp)):
            torch.testing.assert_close(g_i, e_i, **tol("DP block, fp32"),
                                       msg=lambda m, at=at, i=i, n=e_i.shape[0]: f"{at}, request {i} ({n} tokens): "
                                       f"DP attention + EP MoE against the whole block on one process: {m}")
