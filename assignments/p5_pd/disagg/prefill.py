"""The prefill worker: runs prompts through its own P1 engine and hands out their KV.

It owns an `LLM` (P1) and drives it step by step: each prompt is added as a greedy request, the
engine's scheduler batches the prompts (chunked prefill and prefix caching as configured), and as
soon as a request has sampled its first token its KV is read out of the engine's paged pool
(`kv_blocks.gather_kv` over the sequence's block table) and the sequence is dropped, its blocks
freed. A prefill worker never decodes: that is the point of disaggregation.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from minivllm import LLM, SamplingParams

from .kv_blocks import gather_kv
from .messages import KVMessage, PrefillRequest


class PrefillWorker:
    """A P1 engine used for prefills only.

    engine: fields of minivllm's EngineConfig (block_size, num_kv_blocks, max_model_len, ...).
    Attributes: llm (the engine), num_prefills (prompts prefilled over the worker's life),
    kv_bytes_sent (the bytes of KV of every message it made).
    """

    def __init__(self, model_path: str | Path, **engine) -> None:
        self.llm = LLM(model_path, **engine)
        self.num_prefills = 0
        self.kv_bytes_sent = 0

    def prefill(self, requests: Sequence[PrefillRequest]) -> list[KVMessage]:
        """Prefill every request; one KVMessage each, in the requests' order.

        1. Add each prompt to the engine with SamplingParams(temperature=0, max_tokens=2,
           ignore_eos=True): a request that samples its first token stays in the engine (running,
           blocks held), so its block table can still be read.
        2. Step the engine until every request has sampled its first token. After each step, for
           every request that has one (its kvcache.Sequence: `llm.scheduler.live[seq_id]`), gather
           the KV of positions skip_tokens..len(prompt)-1 from `llm.model_runner.kv_cache` over the
           sequence's block table, make its KVMessage, then drop the request from the engine: the
           scheduler's `_finish(seq)` (blocks freed) and `llm._requests.pop(seq_id)`.
        3. Count num_prefills and kv_bytes_sent.
        ValueError for a duplicate request_id in one call.
        """
        ids = [r.request_id for r in requests]
        if len(set(ids)) != len(ids):
            raise ValueError(f"duplicate request ids in one prefill call: {ids}")
        raise NotImplementedError("p5.19: PrefillWorker.prefill")

    def _take(self, seq_id: int, request: PrefillRequest) -> KVMessage:
        """The KVMessage of a sequence that has sampled its first token; the sequence leaves the engine."""
        raise NotImplementedError("p5.20: PrefillWorker._take")
