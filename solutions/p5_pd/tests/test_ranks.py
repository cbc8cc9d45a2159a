"""Three processes (gloo ranks): the router and the prefill worker on rank 0, a decode worker on ranks 1
and 2 (block size 4 against the prefill side's 16). Each request's tokens must be HF's greedy ones,
and what rank 0 sent in float32 (a spy in the rank copies every send: its word, checked here) must be
exactly the prompts' KV, HF's to the fp32 tolerance, each to the rank its request was placed on. And
a decode process that goes away mid-decode (its process group torn down: rank 0 sees the connection
close, as for a killed process) costs no request."""

from __future__ import annotations

import pytest
import torch
from conftest import DECODE_ENGINE, PREFILL_ENGINE, check_tokens, hf_greedy, hf_prompt_kv, model_dir, random_prompts
from rank_programs import serve_rank

MAX_TOKENS = 8
BYTES_PER_TOKEN = 2 * 5 * 2 * 64 * 4  # K and V, 5 layers, 2 KV heads, head_dim 64, fp32


@pytest.mark.points(5)
@pytest.mark.world_size(3)
def test_three_processes_serve_hf_greedy_and_move_exactly_the_prompt_kv(ranks, tol):
    prompts = random_prompts(31, [7, 20, 3, 33, 16])
    results = ranks.run(serve_rank, model_dir(), prompts, MAX_TOKENS)
    head = results[0]
    assert sorted(head["outputs"]) == list(range(len(prompts))), f"outputs for {sorted(head['outputs'])}"
    for rid, p in enumerate(prompts):
        want, gaps = hf_greedy(tuple(p), MAX_TOKENS, ignore_eos=True)
        check_tokens(head["outputs"][rid], want, gaps, tol("greedy near-tie")["atol"], f"request {rid} ({len(p)} tokens)")
    assert all(not r["float_sends"] for r in results[1:]), "a decode rank sent float tensors (KV flows from prefill to decode)"
    sends = head["float_sends"]
    total = sum(t.numel() * 4 for _, t in sends)
    assert total == sum(map(len, prompts)) * BYTES_PER_TOKEN, (
        f"rank 0 sent {total} float32 bytes; the prompts' KV is {sum(map(len, prompts)) * BYTES_PER_TOKEN} "
        f"({sum(map(len, prompts))} tokens x {BYTES_PER_TOKEN} B)")
    placed = {rid: worker + 1 for rid, worker in head["log"]}
    unmatched = list(range(len(sends)))
    for rid, p in enumerate(prompts):
        want = hf_prompt_kv(tuple(p)).reshape(-1)
        hit = next((i for i in unmatched if sends[i][0] == placed[rid] and sends[i][1].numel() == want.numel()
                    and torch.allclose(sends[i][1].reshape(-1), want, **tol("kv, fp32"))), None)
        assert hit is not None, f"request {rid}: no float32 send to rank {placed[rid]} carries its prompt's KV (HF's, {len(p)} tokens)"
        unmatched.remove(hit)
    counters = [r["counters"]["kv_bytes_received"] for r in results[1:]]
    assert sum(counters) == total, f"decode ranks counted {counters} KV bytes received, rank 0 sent {total}"


class Crash(BaseException):
    """Ends a decode rank's loop from inside a step (test code, on that rank)."""


class DiesAfter:
    """A decode worker that, at its (steps + 1)-th step, tears down its rank's process group (its
    connections close, as when the process is killed) and leaves serve_decode's loop."""

    def __init__(self, worker, steps: int) -> None:
        self.worker, self.steps = worker, steps

    @property
    def load(self):
        return self.worker.load

    def can_reserve(self, *args):
        return self.worker.can_reserve(*args)

    def reserve(self, *args):
        return self.worker.reserve(*args)

    def admit(self, message):
        return self.worker.admit(message)

    def step(self):
        import torch.distributed as dist

        self.steps -= 1
        if self.steps < 0:
            dist.destroy_process_group()
            raise Crash()
        return self.worker.step()

    @property
    def kv_bytes_received(self):
        return self.worker.kv_bytes_received


def serve_rank_with_a_death(path: str, prompts: list, max_tokens: int, steps: int) -> dict:
    """Rank 2's decode worker goes away in its (steps + 1)-th step; the others serve as usual."""
    import torch.distributed as dist
    from disagg import DecodeWorker, Request, serve_decode, serve_ranks

    torch.set_num_threads(1)
    if dist.get_rank() == 2:
        try:
            serve_decode(DiesAfter(DecodeWorker(path, **DECODE_ENGINE), steps))
        except Crash:
            return {"crashed": True}
        return {"crashed": False}
    requests = [Request(i, tuple(p), max_tokens, ignore_eos=True) for i, p in enumerate(prompts)]
    result = serve_ranks(path, requests if dist.get_rank() == 0 else [], PREFILL_ENGINE, DECODE_ENGINE)
    if dist.get_rank() != 0:
        return {"counters": dict(result)}
    return {"outputs": {rid: list(o.token_ids) for rid, o in result["outputs"].items()},
            "log": [list(x) for x in result["log"]]}


@pytest.mark.points(4)
@pytest.mark.world_size(3)
def test_a_decode_process_that_goes_away_costs_no_request(ranks, tol):
    """Round 1 places all six (max_prefill_batch 8), least loaded, ties to the lower index: 0, 2, 4 on
    rank 1 (worker 0), 1, 3, 5 on rank 2 (worker 1). Rank 2 goes away in its 3rd step (8 tokens need 7
    steps: mid-decode); rank 0 sees its connection fail, and requests 1, 3, 5 must be placed again on
    worker 0, in that order, with every request's tokens still HF's."""
    prompts = random_prompts(32, [9, 26, 4, 15, 11, 7])
    results = ranks.run(serve_rank_with_a_death, model_dir(), prompts, MAX_TOKENS, 2)
    assert results[2] == {"crashed": True}, "rank 2's worker was to go away in its third step"
    head = results[0]
    assert sorted(head["outputs"]) == list(range(len(prompts))), f"outputs for {sorted(head['outputs'])}"
    for rid, p in enumerate(prompts):
        want, gaps = hf_greedy(tuple(p), MAX_TOKENS, ignore_eos=True)
        check_tokens(head["outputs"][rid], want, gaps, tol("greedy near-tie")["atol"], f"request {rid}, rank 2 gone")
    want_log = [[0, 0], [1, 1], [2, 0], [3, 1], [4, 0], [5, 1], [1, 0], [3, 0], [5, 0]]
    assert head["log"] == want_log, f"placements (request, worker) {head['log']}, want {want_log}"
