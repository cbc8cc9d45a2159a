"""The engine: `LLM(model_path, **config)` loads a model and serves requests step by step.

    llm = LLM("path/to/hf_folder", block_size=16, max_num_seqs=64)
    outputs = llm.generate([[1, 2, 3], [4, 5]], SamplingParams(temperature=0, max_tokens=32))

The KV bookkeeping and the scheduling are stage 5's `kvcache` (BlockManager, Scheduler, Sequence):
each `step()` asks the scheduler for a `kvcache.Batch`, runs the model once over all its tokens, and
hands the sampled tokens back to the scheduler. The engine keeps what kvcache does not know about:
each request's sampling settings, its generator, its prompt text and its timings.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence as Seq
from dataclasses import dataclass
from pathlib import Path

import kvcache
import torch

from .config import EngineConfig, ModelConfig
from .model_runner import ModelRunner
from .outputs import CompletionOutput, RequestMetrics, RequestOutput
from .pool_check import check_pool
from .sampling_params import SamplingParams

StepHook = Callable[["LLM", kvcache.Batch], None]


@dataclass
class Request:
    """What the engine keeps per request beside its `kvcache.Sequence`."""

    seq: kvcache.Sequence
    params: SamplingParams
    generator: torch.Generator  # the request's own when params.seed is set, else the engine's
    prompt: str | None  # the prompt text, None for a token-id prompt
    metrics: RequestMetrics


class LLM:
    """An offline inference engine over a LLaMA stored as an HF folder (config.json + safetensors).

    on_step: optional debug hook called after every step as on_step(llm, batch) with the step's
        `kvcache.Batch`, once its results are applied (tests use it to audit the blocks every step).
    config: fields of EngineConfig.

    Attributes: config, model_config, max_model_len, model_runner, block_manager, scheduler
    (kvcache's), num_preemptions (preemptions over the engine's life).
    """

    def __init__(self, model_path: str | Path, on_step: StepHook | None = None, **config) -> None:
        self.config = EngineConfig.from_kwargs(**config)
        self.model_config = ModelConfig.from_pretrained(model_path)
        self.max_model_len = min(self.config.max_model_len or self.model_config.max_position_embeddings,
                                 self.model_config.max_position_embeddings)
        if not self.config.enable_chunked_prefill and self.config.max_num_batched_tokens < self.max_model_len:
            raise ValueError(f"without chunked prefill, max_num_batched_tokens "
                             f"({self.config.max_num_batched_tokens}) must be >= max_model_len ({self.max_model_len})")
        self.model_runner = ModelRunner(model_path, self.model_config, self.config, self.max_model_len)
        self.block_manager = kvcache.BlockManager(self.model_runner.num_kv_blocks, self.config.block_size,
                                                  enable_prefix_caching=self.config.enable_prefix_caching)
        self.scheduler = kvcache.Scheduler(self._scheduler_config(), self.block_manager)
        self.tokenizer = _load_tokenizer(Path(model_path))
        self.on_step = on_step
        self.num_preemptions = 0
        self._generator = torch.Generator(self.model_runner.device).manual_seed(self.config.seed)
        self._next_id = 0
        self._requests: dict[int, Request] = {}

    def _scheduler_config(self) -> kvcache.SchedulerConfig:
        """kvcache's knobs from the engine's (by default decode-first, SARATHI: steps mixing decodes and chunks)."""
        c = self.config
        # A step runs at most max_num_batched_tokens sequences anyway (each computes >= 1 token), and
        # kvcache insists on budget >= max_num_seqs so that every running sequence can decode at once.
        max_num_seqs = min(c.max_num_seqs, c.max_num_batched_tokens)
        # kvcache refuses a pool that cannot hold one max_model_len sequence; the engine refuses the
        # requests that do not fit instead (add_request), so the scheduler sees what the pool holds.
        longest = min(self.max_model_len, self.block_manager.num_blocks * self.config.block_size)
        return kvcache.SchedulerConfig(max_num_seqs=max_num_seqs, max_num_batched_tokens=c.max_num_batched_tokens,
                                       max_model_len=longest, policy=c.scheduling_policy,
                                       enable_chunked_prefill=c.enable_chunked_prefill)

    def add_request(self, prompt: str | list[int], params: SamplingParams) -> int:
        """Queues one request; returns its id. Token-id prompts are taken as they are."""
        text = prompt if isinstance(prompt, str) else None
        token_ids = self._encode(prompt) if text is not None else [int(t) for t in prompt]
        if not 0 < len(token_ids) < self.max_model_len:
            raise ValueError(f"prompt of {len(token_ids)} tokens: need 1..{self.max_model_len - 1}")
        bad = [t for t in token_ids if not 0 <= t < self.model_config.vocab_size]
        if bad:
            raise ValueError(f"token ids {bad[:5]} outside the vocabulary of {self.model_config.vocab_size}")
        max_tokens = min(params.max_tokens, self.max_model_len - len(token_ids))  # "length" at max_model_len
        if self.block_manager.blocks_needed(len(token_ids) + max_tokens) > self.block_manager.num_blocks:
            raise ValueError(f"a request of up to {len(token_ids) + max_tokens} tokens cannot fit in "
                             f"{self.block_manager.num_blocks} KV blocks of {self.config.block_size}")
        stop = tuple(params.stop_token_ids) + (() if params.ignore_eos else self.model_config.eos_token_ids)
        seq = kvcache.Sequence(self._next_id, token_ids, max_tokens=max_tokens, stop_token_ids=stop)
        generator = self._generator
        if params.seed is not None:
            generator = torch.Generator(self.model_runner.device).manual_seed(params.seed)
        metrics = RequestMetrics(arrival_time=time.perf_counter())
        self.scheduler.add(seq)
        self._requests[seq.seq_id] = Request(seq, params, generator, text, metrics)
        self._next_id += 1
        return seq.seq_id

    def has_unfinished_requests(self) -> bool:
        return self.scheduler.has_unfinished()

    def step(self) -> list[RequestOutput]:
        """One iteration; returns the outputs (`_output`) of the requests that finished in it.

        1. batch = scheduler.schedule(). A batch without entries while requests are pending raises
           RuntimeError naming the waiting, running and free-block counts (never spin forever).
        2. Each entry's request that has no first_scheduled_time gets time.perf_counter().
        3. Before the model runs, copy each (src, dst) of batch.block_copies in the KV pool
           (`model_runner.kv_cache[layer, k|v, block]`): block src into block dst, every layer, K and V.
        4. tokens = model_runner.run(batch, {seq_id: (params, generator)} of the entries' requests);
           finished = scheduler.update(batch, tokens).
        5. Then, at one time.perf_counter() reading: the first_token_time of each request that sampled
           its first token in this step, the finished_time of each finished request.
        6. num_preemptions grows by len(batch.preempted).
        7. When config.debug_check_invariants is set, `check_pool(block_manager, scheduler.running)`.
        8. on_step(self, batch) if a hook is set.
        """
        batch = self.scheduler.schedule()
        if not batch.entries:
            raise RuntimeError(f"nothing schedulable: {len(self.scheduler.waiting)} waiting, "
                               f"{len(self.scheduler.running)} running, "
                               f"{self.block_manager.num_free_blocks} free blocks")
        start = time.perf_counter()
        for entry in batch.entries:
            metrics = self._requests[entry.seq_id].metrics
            metrics.first_scheduled_time = metrics.first_scheduled_time or start
        if batch.block_copies:
            kv = self.model_runner.kv_cache
            src, dst = zip(*batch.block_copies)
            kv[:, :, list(dst)] = kv[:, :, list(src)]
        sampling = {e.seq_id: (self._requests[e.seq_id].params, self._requests[e.seq_id].generator)
                    for e in batch.entries if e.samples}
        tokens = self.model_runner.run(batch, sampling)
        finished = self.scheduler.update(batch, tokens)
        now = time.perf_counter()
        for seq_id in tokens:
            metrics = self._requests[seq_id].metrics
            if metrics.first_token_time is None:
                metrics.first_token_time = now
        for seq in finished:
            self._requests[seq.seq_id].metrics.finished_time = now
        self.num_preemptions += len(batch.preempted)
        if self.config.debug_check_invariants:
            check_pool(self.block_manager, self.scheduler.running)
        if self.on_step is not None:
            self.on_step(self, batch)
        return [self._output(seq.seq_id) for seq in finished]

    def generate(self, prompts: str | Seq[int] | Seq[str] | Seq[Seq[int]],
                 sampling_params: SamplingParams | Seq[SamplingParams] | None = None,
                 use_tqdm: bool = False) -> list[RequestOutput]:
        """Serves all prompts to completion; returns their outputs in the prompts' order.

        prompts: one string, one token-id list, or a list of either. sampling_params: one for all,
        or one per prompt (default: SamplingParams()).
        """
        if isinstance(prompts, str) or (len(prompts) > 0 and isinstance(prompts[0], int)):
            prompts = [prompts]
        params = sampling_params if sampling_params is not None else SamplingParams()
        params = [params] * len(prompts) if isinstance(params, SamplingParams) else list(params)
        if len(params) != len(prompts):
            raise ValueError(f"{len(prompts)} prompts but {len(params)} sampling params")
        ids = [self.add_request(p, sp) for p, sp in zip(prompts, params)]
        results: dict[int, RequestOutput] = {}
        bar = _progress(len(ids)) if use_tqdm else None
        while self.has_unfinished_requests():
            for out in self.step():
                results[int(out.request_id)] = out
                if bar is not None:
                    bar.update(1)
        if bar is not None:
            bar.close()
        for i in ids:
            self._requests.pop(i, None)
        return [results[i] for i in ids]

    def _output(self, seq_id: int) -> RequestOutput:
        req = self._requests[seq_id]
        seq = req.seq
        tokens = seq.completion_token_ids
        text = self.tokenizer.decode(tokens, skip_special_tokens=True) if self.tokenizer else ""
        completion = CompletionOutput(0, text, tokens, _finish_reason(seq))
        return RequestOutput(str(seq_id), req.prompt, seq.prompt_token_ids, [completion], seq.is_finished,
                             seq.num_cached_tokens, req.metrics)

    def _encode(self, text: str) -> list[int]:
        if self.tokenizer is None:
            raise ValueError("string prompts need a tokenizer.json in the model folder; pass token ids")
        return self.tokenizer.encode(text).ids


def _finish_reason(seq: kvcache.Sequence) -> str | None:
    """"stop" after a stop token (EOS unless ignore_eos, or one of stop_token_ids), "length" after
    max_tokens (or max_model_len), None while the request runs."""
    if not seq.is_finished:
        return None
    return "stop" if seq.token_ids[-1] in seq.stop_token_ids else "length"


def _load_tokenizer(model_path: Path):
    """The folder's `tokenizer.json` as a `tokenizers.Tokenizer`, or None."""
    path = model_path / "tokenizer.json"
    if not path.is_file():
        return None
    from tokenizers import Tokenizer

    return Tokenizer.from_file(str(path))


def _progress(total: int):
    try:
        from tqdm.auto import tqdm
    except ImportError:
        return None
    return tqdm(total=total, desc="generate", unit="req", dynamic_ncols=True)
