"""The benchmark client: replay requests against a running server at given arrival times and
record what each one saw (serving/slo.py's RequestRecord).

    records = asyncio.run(run_benchmark("http://127.0.0.1:8000", "course-llama", requests, arrivals))

Each request goes to /v1/completions as token ids, streamed (stream_options.include_usage on),
with ignore_eos so that it generates exactly max_tokens tokens, at time t0 + arrivals[i] where t0
is when run_benchmark started: open loop, whether or not earlier requests have finished (a
closed-loop client that waits would hide the queueing a real arrival process causes).
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass

import httpx

from .slo import RequestRecord


@dataclass(frozen=True)
class BenchRequest:
    prompt_ids: list[int]
    max_tokens: int


async def run_benchmark(base_url: str, model: str, requests: list[BenchRequest],
                        arrivals: list[float]) -> list[RequestRecord]:
    """One RequestRecord per request, in the order of `requests`. A request the server refuses or
    that fails midway gives a record with ok=False (the benchmark goes on). ValueError when
    requests and arrivals differ in length."""
    # BEGIN SOLUTION
    if len(requests) != len(arrivals):
        raise ValueError(f"{len(requests)} requests but {len(arrivals)} arrival times")
    async with httpx.AsyncClient(base_url=base_url, timeout=httpx.Timeout(600.0)) as client:
        t0 = time.perf_counter()
        tasks = [asyncio.create_task(_one(client, model, req, t0 + at)) for req, at in zip(requests, arrivals)]
        return list(await asyncio.gather(*tasks))
    # END SOLUTION


async def _one(client: httpx.AsyncClient, model: str, req: BenchRequest, at: float) -> RequestRecord:
    """Wait until `at`, send, read the stream to [DONE]."""
    # BEGIN SOLUTION
    await asyncio.sleep(max(0.0, at - time.perf_counter()))
    body = {"model": model, "prompt": req.prompt_ids, "max_tokens": req.max_tokens, "temperature": 0.0,
            "stream": True, "stream_options": {"include_usage": True}, "ignore_eos": True}
    send = time.perf_counter()
    first, use, done = None, None, False
    try:
        async with client.stream("POST", "/v1/completions", json=body) as resp:
            if resp.status_code != 200:
                return RequestRecord(send, send, time.perf_counter(), 0, 0, ok=False)
            async for line in resp.aiter_lines():
                if not line.startswith("data: "):
                    continue
                data = line[len("data: "):]
                if data == "[DONE]":
                    done = True
                    break
                chunk = json.loads(data)
                if first is None and chunk["choices"] and chunk["choices"][0].get("text"):
                    first = time.perf_counter()
                if chunk.get("usage"):
                    use = chunk["usage"]
    except (httpx.HTTPError, json.JSONDecodeError, KeyError):
        return RequestRecord(send, send, time.perf_counter(), 0, 0, ok=False)
    end = time.perf_counter()
    if not done or use is None:
        return RequestRecord(send, first or send, end, 0, 0, ok=False)
    return RequestRecord(send, first or end, end, use["completion_tokens"], use["prompt_tokens"])
    # END SOLUTION
