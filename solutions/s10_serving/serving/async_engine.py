"""The engine behind the server: P1's `LLM`, stepped by one asyncio task, each request's new
tokens handed to the handler that waits for them.

    engine = AsyncEngine(llm)            # inside the event loop:
    engine.start()
    async for delta in engine.generate(prompt_ids, params):
        ...                              # delta.text, delta.finish_reason
    await engine.stop()

One task owns the engine (no threads): while requests are pending it runs `llm.step()`, then puts
each request's new tokens on that request's queue and yields to the event loop, so handlers can
write to their sockets and new requests can arrive. A step blocks the loop while it runs; new
requests join at the next step (continuous batching). A handler that leaves `generate` early (the
client disconnected: the ASGI server cancels the handler) aborts its request: the sequence leaves
the scheduler and its KV blocks go back to the pool.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import AsyncIterator
from dataclasses import dataclass

from minivllm import LLM, SamplingParams

from .detokenize import IncrementalDetokenizer
from .json_fsm import JsonFSM, State
from .lora import SLOT_BASE, LoRAManager, token_slots
from .token_mask import TokenMasker, masked_run, token_strings


@dataclass
class Delta:
    """What one step added to one request."""

    token_ids: list[int]          # the tokens sampled in this step (one, or none for held-back text)
    text: str                     # the text they add
    finish_reason: str | None     # "stop" (EOS or a stop token), "length" (max_tokens), None while running
    num_prompt_tokens: int
    num_output_tokens: int        # all tokens generated so far (the stop token included)


@dataclass
class Constraint:
    """A structured-output request's automaton over the vocabulary, and where it stands."""

    masker: TokenMasker
    state: State


@dataclass
class _Stream:
    seq: object                   # the request's kvcache.Sequence
    queue: asyncio.Queue
    detok: IncrementalDetokenizer
    constraint: Constraint | None = None
    slot: int = SLOT_BASE         # the request's LoRA slot (0: the base model)
    sent: int = 0                 # completion tokens already handed out


class AsyncEngine:
    """Serves `llm` to many concurrent handlers. Attributes: llm, lora (the LoRAManager over llm's
    model, or None), streams (request id -> state)."""

    def __init__(self, llm: LLM, lora: LoRAManager | None = None) -> None:
        self.llm = llm
        self.lora = lora
        self.streams: dict[int, _Stream] = {}
        self._wake: asyncio.Event | None = None
        self._task: asyncio.Task | None = None
        self._strings: list[str | None] | None = None  # each token's text, for token masks (made once)
        # the engine samples through masked_run: a constrained request's row is masked before sampling
        # and, with adapters, each token row runs its request's adapter (the slots are set before the forward)
        llm.model_runner.run = functools.partial(masked_run, llm.model_runner, allowed_of=self._allowed_of,
                                                 before_forward=self._set_slots if lora is not None else None)

    def constraint(self, fsm: JsonFSM) -> Constraint:
        """A fresh Constraint of `fsm` over this engine's vocabulary, at the automaton's start."""
        if self._strings is None:
            self._strings = token_strings(self.llm.tokenizer, self.llm.model_config.vocab_size)
        eos = self.llm.model_config.eos_token_ids[0]
        return Constraint(TokenMasker(fsm, self._strings, eos), fsm.start())

    def _allowed_of(self, seq_id: int) -> list[int] | None:
        stream = self.streams.get(seq_id)
        if stream is None or stream.constraint is None:
            return None
        return stream.constraint.masker.allowed(stream.constraint.state)

    def slot(self, adapter: str | None) -> int:
        """The LoRA slot of adapter `adapter` (None: the base model); ValueError for an unknown name."""
        if adapter is None:
            return SLOT_BASE
        if self.lora is None:
            raise ValueError(f"no adapter named {adapter!r}: this engine serves no LoRA adapters")
        return self.lora.slot(adapter)

    def _slot_of(self, seq_id: int) -> int:
        stream = self.streams.get(seq_id)
        return SLOT_BASE if stream is None else stream.slot

    def _set_slots(self, batch) -> None:
        self.lora.set_slots(token_slots(batch.entries, self._slot_of).to(self.llm.model_runner.device))

    def start(self) -> None:
        """Start the stepping task in the running event loop."""
        self._wake = asyncio.Event()
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        """Cancel the stepping task and abort every request still running."""
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
        for rid in list(self.streams):
            self.abort(rid)

    async def generate(self, prompt_ids: list[int], params: SamplingParams,
                       constraint: Constraint | None = None, adapter: str | None = None) -> AsyncIterator[Delta]:
        """Queue a request and yield its Deltas until one has a finish_reason. ValueError (from the
        engine) for a prompt that cannot be served or an unknown adapter. Leaving early (an
        exception, a cancellation, the consumer closing the generator) aborts the request. With a
        constraint, every token is sampled under its mask (the engine asks `_allowed_of` each step);
        with an adapter, every token of the request runs through it (its `slot`, read by `_slot_of`)."""
        # BEGIN SOLUTION
        slot = self.slot(adapter)
        rid = self.llm.add_request(list(prompt_ids), params)
        stream = _Stream(self.llm.scheduler.live[rid], asyncio.Queue(), IncrementalDetokenizer(self.llm.tokenizer),
                         constraint, slot)
        self.streams[rid] = stream
        self._wake.set()
        try:
            while True:
                item = await stream.queue.get()
                if isinstance(item, BaseException):
                    raise item
                yield item
                if item.finish_reason is not None:
                    return
        finally:
            self.abort(rid)
        # END SOLUTION
        yield  # never reached; keeps this an async generator while it is a stub

    def abort(self, rid: int) -> None:
        """Forget request `rid`: remove its sequence from the scheduler (waiting or running) and
        free its KV blocks. A request that already finished only leaves `streams`."""
        # BEGIN SOLUTION
        self.streams.pop(rid, None)
        self.llm._requests.pop(rid, None)  # the engine's per-request record (generate() drops it the same way)
        sched = self.llm.scheduler
        seq = sched.live.get(rid)
        if seq is None:
            return
        if seq in sched.running:
            sched._finish(seq)  # FINISHED, blocks freed, out of running and live
        else:
            sched.waiting.remove(seq)
            del sched.live[rid]
        # END SOLUTION

    async def _run(self) -> None:
        while True:
            if not self.llm.has_unfinished_requests():
                self._wake.clear()
                await self._wake.wait()
                continue
            try:
                self.llm.step()
            except Exception as exc:  # noqa: BLE001  a failed step fails every request in it, not the server
                for rid, stream in list(self.streams.items()):
                    stream.queue.put_nowait(RuntimeError(f"engine step failed: {exc}"))
                    self.abort(rid)
                continue
            self._publish()
            await asyncio.sleep(0)  # let the handlers send what was published

    def _publish(self) -> None:
        """After a step: advance each constrained request's automaton over its new tokens, and put
        a Delta on the queue of each request that got new tokens."""
        # BEGIN SOLUTION
        for stream in self.streams.values():
            seq = stream.seq
            new = seq.completion_token_ids[stream.sent:]
            if not new:
                continue
            stream.sent += len(new)
            if stream.constraint is not None:
                for token in new:
                    stream.constraint.state = stream.constraint.masker.advance(stream.constraint.state, token)
            finished = seq.is_finished
            text = stream.detok.push(new) + (stream.detok.finish() if finished else "")
            reason = None
            if finished:
                reason = "stop" if seq.token_ids[-1] in seq.stop_token_ids else "length"
            stream.queue.put_nowait(Delta(new, text, reason, seq.num_prompt_tokens, seq.num_completion_tokens))
        # END SOLUTION
