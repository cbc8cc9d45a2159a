"""ZeRO stages 1, 2 and 3 on two gloo ranks against one process running torch.optim.Adam on the
whole global batch (fp32, 3 steps, lr 0.01; rank 1 starts from noise), and each rank's averaged
gradient shard against one process's gradient (Adam's update hardly changes when every gradient is
scaled by the same factor, so a sum instead of an average shows only there). Net has 707 parameters:
rank 0 owns elements [0, 354), rank 1 [354, 707). Also checked: the memory each rank holds after a
step, against the ZeRO paper's accounting for this fp32 run (bytes per element: weights 4, gradients
4, Adam's two moments 8, the fp32 master copy of the shard 4 in stages 1 and 2; in stage 3 the shard
is the weights):
    stage 1: weights 4P, gradients 4P, optimizer 12S
    stage 2: weights 4P, gradients 4S, optimizer 12S
    stage 3: weights 4S, gradients 4S, optimizer 8S
P: all parameters, S: the rank's own elements (end - start)."""

from __future__ import annotations

import pytest
import torch
from rank_programs import draw_case, one_process_adam, one_process_grads, zero_on_rank

LR = 0.01


def expected_held(stage: int, total: int, own: int) -> dict:
    grads = 4 * total if stage == 1 else 4 * own
    return {"params": 4 * total if stage < 3 else 4 * own, "grads": grads,
            "optimizer": 12 * own if stage < 3 else 8 * own}


def check_zero(results: list[list[dict]], case: dict, stages: list[int], tol: dict) -> None:
    want = one_process_adam(case, LR)
    want_grads = one_process_grads(case, LR)
    total = sum(w.numel() for w in case["weights"])
    world = len(results)
    for rank, per_stage in enumerate(results):
        for stage, res in zip(stages, per_stage):
            s = -(-total // world)
            bounds = (min(rank * s, total), min((rank + 1) * s, total))
            assert tuple(res["bounds"]) == bounds, f"stage {stage}, rank {rank}: shard {res['bounds']}, want {bounds}"
            for step, (got_step, want_step) in enumerate(zip(res["params"], want)):
                for i, (g, w) in enumerate(zip(got_step, want_step)):
                    torch.testing.assert_close(g, w, **tol, msg=lambda m: f"ZeRO-{stage}, rank {rank}, after step "
                                               f"{step + 1}, parameter {i}: {m}")
            for step, got in enumerate(res["grads"]):  # Adam hides a gradient scaled by N: check it here
                torch.testing.assert_close(got, want_grads[step][bounds[0]:bounds[1]], **tol,
                                           msg=lambda m: f"ZeRO-{stage}, rank {rank}, step {step + 1}: this rank's "
                                           f"averaged gradient shard against one process's gradient: {m}")
            own = bounds[1] - bounds[0]
            held = expected_held(stage, total, own)
            assert res["held"] == held, f"ZeRO-{stage}, rank {rank}: held_bytes {res['held']}, want {held}"
            seen = {"module": res["module_numel"], "grads": res["module_grads"], "moments": res["moments_numel"]}
            want_seen = {"module": total if stage < 3 else 0, "grads": total if stage == 1 else 0, "moments": 2 * own}
            assert seen == want_seen, f"ZeRO-{stage}, rank {rank}: elements held {seen}, want {want_seen}"


@pytest.mark.points(10)
@pytest.mark.world_size(2)
def test_zero_stages_equal_one_process_adam_and_hold_their_share(ranks, tol):
    case = draw_case(seed=11, steps=3, batch=8)
    results = ranks.run(zero_on_rank, case, [1, 2, 3], LR)
    check_zero(results, case, [1, 2, 3], tol("ZeRO vs one process, fp32"))
