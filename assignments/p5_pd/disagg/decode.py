"""The decode worker: takes prompts whose KV was computed elsewhere and decodes them in its own engine.

A request arrives in two calls. `reserve` makes its `kvcache.Sequence` and allocates its blocks in
this engine's pool; the block manager's prefix cache may already hold a leading part of the prompt
(a hit: those blocks are shared, their KV is here), and `reserve` says how many tokens, so the
prefill side sends only the rest. `admit` writes the KV that came (`kv_blocks.scatter_kv`, into
this side's blocks, whatever the block size on the other side), appends the first token and puts
the sequence among the scheduler's running ones: from the next `step` on, it decodes like any other.
"""

from __future__ import annotations

import time
from pathlib import Path

import kvcache
import torch
from minivllm import LLM, RequestMetrics, SamplingParams
from minivllm.engine import Request as EngineRequest

from .kv_blocks import scatter_kv
from .messages import DecodeOutput, KVMessage


class DecodeWorker:
    """A P1 engine that never prefills: every prompt's KV comes in a KVMessage.

    engine: fields of minivllm's EngineConfig. Attributes: llm, kv_bytes_received (over the
    worker's life), reserved ({request_id: its Sequence} of requests reserved and not yet admitted).
    """

    def __init__(self, model_path: str | Path, **engine) -> None:
        self.llm = LLM(model_path, **engine)
        self.reserved: dict[int, kvcache.Sequence] = {}
        self.kv_bytes_received = 0

    @property
    def load(self) -> int:
        """Requests this worker holds: reserved, or admitted and not finished."""
        return len(self.reserved) + len(self.llm.scheduler.live)

    def can_reserve(self, num_prompt_tokens: int, max_tokens: int) -> bool:
        """Whether a request of this size fits the pool's free blocks now (its whole prompt plus
        max_tokens, no prefix hit assumed) and max_model_len."""
        total = num_prompt_tokens + max_tokens
        bm = self.llm.block_manager
        return total <= self.llm.max_model_len and bm.blocks_needed(total) <= bm.num_free_blocks

    def reserve(self, request_id: int, prompt_token_ids: tuple[int, ...], max_tokens: int,
                ignore_eos: bool = False) -> int:
        """Allocate the request's blocks; return how many leading prompt tokens this pool already holds.

        The sequence: kvcache.Sequence(request_id, prompt, max_tokens, stop_token_ids= the model's
        EOS ids unless ignore_eos). `llm.block_manager.allocate(seq)` gives it blocks for the whole
        prompt, prefix-cache hits first; the hit count, seq.num_cached_tokens, is returned (a
        multiple of this side's block size, < len(prompt)). ValueError if request_id is reserved or
        live here, or if the request does not fit (`can_reserve`).
        """
        if request_id in self.reserved or request_id in self.llm.scheduler.live:
            raise ValueError(f"request {request_id} is already on this worker")
        if not self.can_reserve(len(prompt_token_ids), max_tokens):
            raise ValueError(f"request {request_id} ({len(prompt_token_ids)} + {max_tokens} tokens) does not fit "
                             f"{self.llm.block_manager.num_free_blocks} free blocks / max_model_len {self.llm.max_model_len}")
        raise NotImplementedError("p5.1: DecodeWorker.reserve")

    def admit(self, message: KVMessage) -> DecodeOutput | None:
        """Take a reserved request's KV and first token; it decodes from the next step on.

        message.start must equal the reserved hit count and message.kv must cover the prompt's
        positions message.start..len(prompt)-1 (ValueError otherwise, the reservation kept). Write
        the KV into the sequence's blocks, mark the prompt computed (num_computed_tokens, and
        `block_manager.cache_full_blocks` so later requests can hit it), append the first token.
        If that ends the request (max_tokens == 1, or a stop token), free its blocks and return its
        DecodeOutput; otherwise the sequence becomes RUNNING in the scheduler (`running`, `live`),
        with an engine request record (greedy SamplingParams, `llm._requests[request_id]`), and
        None is returned.
        """
        seq = self.reserved.get(message.request_id)
        if seq is None:
            raise ValueError(f"request {message.request_id} was not reserved here")
        n = seq.num_prompt_tokens
        if tuple(message.prompt_token_ids) != tuple(seq.prompt_token_ids):
            raise ValueError(f"request {message.request_id}: the message's prompt differs from the reserved one")
        if message.start != seq.num_cached_tokens or message.kv.dim() != 5 or message.start + message.kv.shape[2] != n:
            raise ValueError(f"request {message.request_id}: KV for positions {message.start}.."
                             f"{message.start + (message.kv.shape[2] if message.kv.dim() == 5 else 0) - 1}, "
                             f"need {seq.num_cached_tokens}..{n - 1}")
        raise NotImplementedError("p5.2: DecodeWorker.admit")

    def step(self) -> list[DecodeOutput]:
        """One engine step over the running requests (nothing when none runs); the requests that
        finished in it, their engine records dropped."""
        raise NotImplementedError("p5.3: DecodeWorker.step")

    def abort(self, request_id: int) -> None:
        """Forget a request, reserved or running, and free its blocks (no-op for one not here)."""
        seq = self.reserved.pop(request_id, None)
        if seq is not None:
            self.llm.block_manager.free(seq)
            return
        seq = self.llm.scheduler.live.get(request_id)
        if seq is not None:
            self.llm.scheduler._finish(seq)
            self.llm._requests.pop(request_id, None)


def _output(seq: kvcache.Sequence) -> DecodeOutput:
    stopped = seq.token_ids[-1] in seq.stop_token_ids
    return DecodeOutput(seq.seq_id, tuple(seq.completion_token_ids), "stop" if stopped else "length")
