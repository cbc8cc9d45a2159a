"""Hidden: the engine loop's bookkeeping without HTTP. A request aborted while it still waits for a
seat leaves the scheduler entirely (not only its waiting queue); a request ended by a stop token
counts that token among its output tokens. The tokens come from HF greedy on the same weights,
computed here; the engine runs in the worker. And prepare(): a request that fills the context
exactly is served, and the body's ignore_eos reaches the engine."""

from __future__ import annotations

import json

import pytest
from conftest import MODEL_NAME, _greedy, encode, model_dir

from autograder.testing import in_worker


@in_worker
def abort_a_waiting_request(folder: str, prompts: list[list[int]]) -> dict:
    """Two requests on an engine of one seat: the first runs, the second waits and is cancelled."""
    import asyncio

    from minivllm import LLM, SamplingParams
    from serving import ENGINE_DEFAULTS, AsyncEngine

    async def main() -> dict:
        llm = LLM(folder, max_model_len=256, **{**ENGINE_DEFAULTS, "num_kv_blocks": 48, "max_num_seqs": 1})
        engine = AsyncEngine(llm)
        engine.start()
        params = SamplingParams(temperature=0, max_tokens=24, ignore_eos=True)
        try:
            first, second = engine.generate(prompts[0], params), engine.generate(prompts[1], params)
            await first.__anext__()
            waiter = asyncio.ensure_future(second.__anext__())
            for _ in range(100):  # until the second request is queued behind the first
                await asyncio.sleep(0.005)
                if len(llm.scheduler.waiting):
                    break
            queued = len(llm.scheduler.waiting)
            waiter.cancel()
            try:
                await waiter
            except BaseException:  # noqa: BLE001, S110  the cancellation, or the generator's own end
                pass
            await second.aclose()
            after = {"live": len(llm.scheduler.live), "waiting": len(llm.scheduler.waiting)}
            tokens = [d async for d in first]
            return {"queued": queued, "after": after, "first_done": tokens[-1].finish_reason if tokens else None,
                    "unfinished": llm.has_unfinished_requests(),
                    "free": llm.block_manager.num_free_blocks, "blocks": llm.block_manager.num_blocks}
        finally:
            await engine.stop()

    return asyncio.run(main())


@in_worker
def run_until_stop_token(folder: str, prompt: list[int], stop: int) -> list[tuple]:
    """Every Delta of one request that ends at `stop`: (token_ids, finish_reason, num_output_tokens)."""
    import asyncio

    from minivllm import LLM, SamplingParams
    from serving import ENGINE_DEFAULTS, AsyncEngine

    async def main() -> list[tuple]:
        llm = LLM(folder, max_model_len=256, **{**ENGINE_DEFAULTS, "num_kv_blocks": 48})
        engine = AsyncEngine(llm)
        engine.start()
        try:
            params = SamplingParams(temperature=0, max_tokens=20, ignore_eos=True, stop_token_ids=[stop])
            return [(list(d.token_ids), d.finish_reason, d.num_output_tokens)
                    async for d in engine.generate(prompt, params)]
        finally:
            await engine.stop()

    return asyncio.run(main())


@pytest.mark.points(2)
def test_a_request_aborted_while_waiting_leaves_the_scheduler():
    out = abort_a_waiting_request(model_dir(), [encode("Call me Ishmael."), encode("The whale")])
    assert out["queued"] == 1, f"with one seat the second request should wait behind the first: {out}"
    assert out["after"] == {"live": 1, "waiting": 0}, (
        f"after the waiting request was cancelled the scheduler holds {out['after']}: only the running "
        f"request may stay (an aborted waiting sequence must leave `live` too, or the engine never idles)")
    assert out["first_done"] == "length" and not out["unfinished"], f"the first request must finish alone: {out}"
    assert out["free"] == out["blocks"], f"{out['blocks'] - out['free']} KV blocks still held after both ended"


@pytest.mark.points(1)
def test_a_stop_token_counts_as_an_output_token(tol):
    prompt = encode("Call me Ishmael.")
    tokens, gaps = _greedy(tuple(prompt), 12, True)
    near = tol("greedy near-tie")["atol"]
    # the stop token: the first token from the third on that is new there, before any near-tie of HF's
    n = next(i for i in range(2, len(tokens)) if tokens[i] not in tokens[:i] and min(gaps[:i + 1]) >= near)
    deltas = run_until_stop_token(model_dir(), prompt, tokens[n])
    got = [t for d in deltas for t in d[0]]
    assert got == list(tokens[:n + 1]), f"greedy tokens up to the stop token {tokens[n]}: got {got}, HF {list(tokens[:n + 1])}"
    assert deltas[-1][1] == "stop", f"a request ended by a stop token finishes with 'stop', got {deltas[-1][1]!r}"
    assert deltas[-1][2] == n + 1, (f"num_output_tokens {deltas[-1][2]} at the end, want {n + 1}: the stop token "
                                    f"is generated, so it counts (usage.completion_tokens)")


@in_worker
def prepared(folder: str, bodies: list[bytes], max_model_len: int, served: str) -> list:
    """For each raw completion body: (prompt length, max_tokens, ignore_eos) of prepare()'s result,
    or ("error", status) where prepare raises its APIError."""
    from serving import APIError, CompletionRequest, parse_body, prepare
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(f"{folder}/tokenizer.json")
    out = []
    for raw in bodies:
        try:
            p = prepare(parse_body(raw, CompletionRequest), served, tokenizer, max_model_len)
            out.append((len(p.prompt_ids), p.params.max_tokens, p.params.ignore_eos))
        except APIError as err:
            out.append(("error", err.status))
    return out


@pytest.mark.points(1)
def test_a_request_that_fills_the_context_exactly_is_served_and_ignore_eos_reaches_the_engine():
    ids = encode("Call me Ishmael.")
    fits, over = 64 - len(ids), 65 - len(ids)
    bodies = [json.dumps({"model": MODEL_NAME, "prompt": ids, "max_tokens": n, **extra}).encode()
              for n, extra in ((fits, {}), (over, {}), (8, {"ignore_eos": True}))]
    exact, too_long, benchmark = prepared(model_dir(), bodies, 64, MODEL_NAME)
    assert exact == (len(ids), fits, False), (f"prompt {len(ids)} + max_tokens {fits} = 64 = max_model_len fits "
                                              f"(the check is prompt + max_tokens > max_model_len): got {exact}")
    assert too_long == ("error", 400), f"prompt {len(ids)} + max_tokens {over} = 65 > 64 is a 400: got {too_long}"
    assert benchmark[2] is True, f"ignore_eos=true in the body must reach SamplingParams: got {benchmark}"
