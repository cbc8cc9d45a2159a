"""The router over one prefill worker and two decode workers in one process: each request served once,
with HF's greedy tokens, on the least-loaded worker; and a decode worker that dies mid-request (a
wrapper, conftest's Faulty, raises ConnectionError from its k-th step on) costs nothing:
its requests are prefilled again and finish elsewhere, none lost, none twice."""

from __future__ import annotations

import pytest
from conftest import DECODE_ENGINE, PREFILL_ENGINE, Faulty, check_tokens, hf_greedy, model_dir, random_prompts

from autograder.testing import in_worker

MAX_TOKENS = 10


@in_worker
def route(path: str, prompts: list, max_tokens: int, die_after: int | None) -> dict:
    """Serve the prompts through Router(prefill, [decoder 0, decoder 1]); decoder 1 dies after
    `die_after` steps when given. Plain records of what happened."""
    from disagg import DecodeWorker, PrefillWorker, Request, Router

    prefill = PrefillWorker(path, **PREFILL_ENGINE)
    decoders = [DecodeWorker(path, **DECODE_ENGINE), DecodeWorker(path, **DECODE_ENGINE)]
    wrapped = [decoders[0], Faulty(decoders[1], die_at=("step", die_after + 1)) if die_after is not None else decoders[1]]
    router = Router(prefill, wrapped, max_prefill_batch=4)
    outs = router.run([Request(i, tuple(p), max_tokens, ignore_eos=True) for i, p in enumerate(prompts)])
    return {"outputs": {rid: (list(o.token_ids), o.finish_reason) for rid, o in outs.items()},
            "log": [list(x) for x in router.log], "prefills": dict(router.prefills), "dead": sorted(router.dead),
            "calls_after_death": getattr(wrapped[1], "after", 0),
            "survivor_used_blocks": decoders[0].llm.block_manager.num_used_blocks}


def check_outputs(result: dict, prompts: list, tol, case: str) -> None:
    assert sorted(result["outputs"]) == list(range(len(prompts))), f"{case}: outputs for {sorted(result['outputs'])}, want every request once"
    for rid, prompt in enumerate(prompts):
        tokens, reason = result["outputs"][rid]
        want, gaps = hf_greedy(tuple(prompt), MAX_TOKENS, ignore_eos=True)
        check_tokens(tokens, want, gaps, tol("greedy near-tie")["atol"], f"{case}, request {rid}")
        assert reason == "length", f"{case}, request {rid}: finish_reason {reason!r} (ignore_eos, {MAX_TOKENS} tokens)"


@pytest.mark.points(3)
def test_router_serves_every_request_on_the_least_loaded_worker(tol):
    prompts = random_prompts(21, [9, 30, 4, 17, 12])
    result = route(model_dir(), prompts, MAX_TOKENS, None)
    check_outputs(result, prompts, tol, "two live decode workers")
    # one round places 4 requests (max_prefill_batch): loads 0,0 -> w0; 1,0 -> w1; 1,1 -> w0; 2,1 -> w1;
    # request 4 waits for the next round, when both hold 2 (none has finished: 10 tokens need 9 steps) -> w0
    assert result["log"] == [[0, 0], [1, 1], [2, 0], [3, 1], [4, 0]], f"placements (request, worker): {result['log']}"
    assert all(n == 1 for n in result["prefills"].values()), f"prefills per request: {result['prefills']}"


@pytest.mark.points(4)
def test_a_dead_decode_worker_costs_no_request(tol):
    prompts = random_prompts(22, [9, 30, 4, 17, 12])
    result = route(model_dir(), prompts, MAX_TOKENS, 3)  # worker 1 dies in its 4th step, mid-decode
    check_outputs(result, prompts, tol, "worker 1 died after 3 steps")
    assert result["dead"] == [1], f"dead workers: {result['dead']}, want [1]"
    moved = sorted(rid for rid, n in result["prefills"].items() if n == 2)
    assert moved == [1, 3], f"requests prefilled twice: {moved}, want [1, 3] (the two on worker 1 when it died)"
    assert result["calls_after_death"] == 0, f"the router called the dead worker {result['calls_after_death']} more times"
    assert result["survivor_used_blocks"] == 0, f"worker 0 still holds {result['survivor_used_blocks']} blocks at the end"
