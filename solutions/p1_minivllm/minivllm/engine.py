"""The engine: `LLM(model_path, **config)` loads a model and serves requests step by step.

    llm = LLM("path/to/hf_folder", block_size=16, max_num_seqs=64)
    outputs = llm.generate([[1, 2, 3], [4, 5]], SamplingParams(temperature=0, max_tokens=32))

Each `step()` asks the scheduler for work, runs the model once over all scheduled tokens, and lets
the scheduler apply the sampled tokens. `generate` adds requests and steps until all finish.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence as Seq
from pathlib import Path

import torch

from .block_manager import BlockManager
from .config import EngineConfig, ModelConfig
from .model_runner import ModelRunner
from .outputs import CompletionOutput, RequestMetrics, RequestOutput
from .sampling_params import SamplingParams
from .scheduler import ScheduledSeq, Scheduler
from .sequence import Sequence

StepHook = Callable[["LLM", list[ScheduledSeq]], None]


class LLM:
    """An offline inference engine over a LLaMA stored as an HF folder (config.json + safetensors).

    on_step: optional debug hook called after every step as on_step(llm, scheduled), once the
        step's results are applied (tests use it to check the block invariants at every step).
    config: fields of EngineConfig.

    Attributes: config, model_config, max_model_len, model_runner, block_manager, scheduler.
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
        self.block_manager = BlockManager(self.model_runner.num_kv_blocks, self.config.block_size,
                                          self.config.enable_prefix_caching)
        self.scheduler = Scheduler(self.config, self.block_manager, self.max_model_len,
                                   self.model_config.eos_token_ids)
        self.tokenizer = _load_tokenizer(Path(model_path))
        self.on_step = on_step
        self._generator = torch.Generator(self.model_runner.device).manual_seed(self.config.seed)
        self._next_id = 0
        self._requests: dict[int, tuple[Sequence, str | None, RequestMetrics]] = {}

    def add_request(self, prompt: str | list[int], params: SamplingParams) -> int:
        """Queues one request; returns its id. Token-id prompts are taken as they are."""
        text = prompt if isinstance(prompt, str) else None
        token_ids = self._encode(prompt) if text is not None else [int(t) for t in prompt]
        if not 0 < len(token_ids) < self.max_model_len:
            raise ValueError(f"prompt of {len(token_ids)} tokens: need 1..{self.max_model_len - 1}")
        bad = [t for t in token_ids if not 0 <= t < self.model_config.vocab_size]
        if bad:
            raise ValueError(f"token ids {bad[:5]} outside the vocabulary of {self.model_config.vocab_size}")
        longest = min(len(token_ids) + params.max_tokens, self.max_model_len)
        if -(-longest // self.config.block_size) > self.block_manager.num_blocks:
            raise ValueError(f"a request of up to {longest} tokens cannot fit in "
                             f"{self.block_manager.num_blocks} KV blocks of {self.config.block_size}")
        seq = Sequence(self._next_id, token_ids, params, self.config.block_size)
        if params.seed is not None:
            seq.generator = torch.Generator(self.model_runner.device).manual_seed(params.seed)
        else:
            seq.generator = self._generator
        self._requests[seq.seq_id] = (seq, text, RequestMetrics(arrival_time=time.perf_counter()))
        self._next_id += 1
        self.scheduler.add(seq)
        return seq.seq_id

    def has_unfinished_requests(self) -> bool:
        return self.scheduler.has_unfinished()

    def step(self) -> list[RequestOutput]:
        """One iteration: schedule, run the model once, apply the results; returns the requests that
        finished in this step.

        Raises RuntimeError when requests are pending but nothing can be scheduled (a stuck
        scheduler must not spin forever). Records each request's first-scheduled and first-token
        times in its metrics; finished requests get their finished time. Then, when
        config.debug_check_invariants is set, checks `block_manager.check_invariants` over the
        running sequences, and calls `on_step(self, scheduled)` if given.
        """
        # BEGIN SOLUTION
        scheduled = self.scheduler.schedule()
        if not scheduled:
            raise RuntimeError(f"nothing schedulable: {len(self.scheduler.waiting)} waiting, "
                               f"{len(self.scheduler.running)} running, "
                               f"{self.block_manager.num_free_blocks} free blocks")
        start = time.perf_counter()
        for item in scheduled:
            metrics = self._requests[item.seq.seq_id][2]
            metrics.first_scheduled_time = metrics.first_scheduled_time or start
        sampled = self.model_runner.run(scheduled)
        finished = self.scheduler.postprocess(scheduled, sampled)
        now = time.perf_counter()
        for item, token in zip(scheduled, sampled):
            metrics = self._requests[item.seq.seq_id][2]
            if token is not None and metrics.first_token_time is None:
                metrics.first_token_time = now
        for seq in finished:
            self._requests[seq.seq_id][2].finished_time = now
        if self.config.debug_check_invariants:
            self.block_manager.check_invariants(self.scheduler.running)
        if self.on_step is not None:
            self.on_step(self, scheduled)
        return [self._output(seq.seq_id) for seq in finished]
        # END SOLUTION

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
        seq, prompt, metrics = self._requests[seq_id]
        text = self.tokenizer.decode(seq.completion_token_ids, skip_special_tokens=True) if self.tokenizer else ""
        completion = CompletionOutput(0, text, seq.completion_token_ids, seq.finish_reason)
        return RequestOutput(str(seq_id), prompt, seq.prompt_token_ids, [completion], seq.is_finished,
                             seq.num_cached_tokens, metrics)

    def _encode(self, text: str) -> list[int]:
        if self.tokenizer is None:
            raise ValueError("string prompts need a tokenizer.json in the model folder; pass token ids")
        return self.tokenizer.encode(text).ids


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
