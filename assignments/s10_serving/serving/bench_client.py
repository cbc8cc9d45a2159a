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
    raise NotImplementedError("s10.4: run_benchmark")


async def _one(client: httpx.AsyncClient, model: str, req: BenchRequest, at: float) -> RequestRecord:
    """Wait until `at`, send, read the stream to [DONE]."""
    raise NotImplementedError("s10.5: _one")
