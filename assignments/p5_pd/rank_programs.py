"""What the process tests run on every rank (shared by tests/ and hidden/): `serve_ranks` under the
collective spy, which copies every tensor the rank sends. What a rank returns is its word: the judge
checks the tokens against HF and the float32 sends against HF's KV of each prompt."""

from __future__ import annotations

import torch
from conftest import DECODE_ENGINE, PREFILL_ENGINE

from autograder.collective_spy import counting_collectives


def serve_rank(path: str, prompts: list, max_tokens: int, max_prefill_batch: int = 8) -> dict:
    """Every rank: serve_ranks (rank 0 routes and prefills, the others decode) under the collective
    spy; plain records for the judge: rank 0's outputs and placements, every rank's float32 sends."""
    import torch.distributed as dist
    from disagg import Request, serve_ranks

    torch.set_num_threads(1)
    requests = [Request(i, tuple(p), max_tokens, ignore_eos=True) for i, p in enumerate(prompts)]
    messages: list = []
    with counting_collectives("disagg", messages):
        result = serve_ranks(path, requests if dist.get_rank() == 0 else [], PREFILL_ENGINE, DECODE_ENGINE,
                             max_prefill_batch=max_prefill_batch)
    floats = [(m["peer"], m["data"]) for m in messages if m["kind"] == "send" and m["data"].dtype == torch.float32]
    if dist.get_rank() != 0:
        return {"counters": dict(result), "float_sends": floats}
    return {"outputs": {rid: list(o.token_ids) for rid, o in result["outputs"].items()},
            "log": [list(x) for x in result["log"]], "float_sends": floats}
