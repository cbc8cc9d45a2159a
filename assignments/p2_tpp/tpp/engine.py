"""`ParallelLLM`: minivllm's engine on one rank of a TP x PP grid. Every rank runs the same engine
(scheduler, block manager, requests) on the same inputs, so every rank plans the same steps; only
the runner differs, and the tokens it returns are the same on every rank.

    # on each of tp * pp ranks, torch.distributed initialised:
    llm = ParallelLLM(model_path, tp=2, pp=2, num_microbatches=2, max_num_seqs=8)
    outs = llm.generate(prompts, SamplingParams(temperature=0, max_tokens=64))
"""

from __future__ import annotations

from collections.abc import Sequence as Seq
from pathlib import Path

import kvcache
import torch
import torch.distributed as dist
from minivllm import LLM, EngineConfig, ModelConfig, RequestOutput, SamplingParams
from minivllm.engine import _load_tokenizer

from .comm import Comm
from .runner import ParallelRunner
from .sharding import ParallelConfig, shard_heads, stage_layers
from .timeline import Timeline


def check_model_fits(model: ModelConfig, par: ParallelConfig) -> None:
    """ValueError (the same on every rank, before any communication) when the model cannot be cut
    as asked: heads or KV heads over tp, MLP columns or vocabulary over tp, layers over pp."""
    shard_heads(model.num_heads, model.num_kv_heads, par.tp, 0)
    stage_layers(model.num_layers, par.pp, 0)
    for name, size in (("intermediate_size", model.intermediate_size), ("vocab_size", model.vocab_size)):
        if size % par.tp:
            raise ValueError(f"{name} {size} does not split over tp={par.tp}")


class ParallelLLM(LLM):
    """minivllm.LLM with a ParallelRunner. tp, pp, num_microbatches: see ParallelConfig;
    record_timeline: keep every compute and communication event in `timeline` (Timeline).

    torch.distributed must be initialised with world size tp * pp (or not at all for tp = pp = 1)."""

    def __init__(self, model_path: str | Path, *, tp: int = 1, pp: int = 1, num_microbatches: int = 1,
                 record_timeline: bool = False, on_step=None, **config) -> None:
        self.parallel = ParallelConfig(tp, pp, num_microbatches)
        world = dist.get_world_size() if dist.is_initialized() else 1
        if world != self.parallel.world_size:
            raise ValueError(f"tp={tp} x pp={pp} needs a world of {self.parallel.world_size} ranks, "
                             f"torch.distributed has {world}")
        self.config = EngineConfig.from_kwargs(**config)
        self.model_config = ModelConfig.from_pretrained(model_path)
        check_model_fits(self.model_config, self.parallel)
        self.max_model_len = min(self.config.max_model_len or self.model_config.max_position_embeddings,
                                 self.model_config.max_position_embeddings)
        rank = dist.get_rank() if dist.is_initialized() else 0
        self.timeline = Timeline(rank, enabled=record_timeline)
        self.comm = Comm(self.parallel, self.timeline)
        self.model_runner = ParallelRunner(model_path, self.model_config, self.config, self.max_model_len, self.comm)
        self.block_manager = kvcache.BlockManager(self.model_runner.num_kv_blocks, self.config.block_size,
                                                  enable_prefix_caching=self.config.enable_prefix_caching)
        self.scheduler = kvcache.Scheduler(self._scheduler_config(), self.block_manager)
        self.tokenizer = _load_tokenizer(Path(model_path))
        self.on_step = on_step
        self.num_preemptions = 0
        self._next_id = 0
        self._requests = {}
        raise NotImplementedError("p2.6: ParallelLLM.__init__")

    def step(self) -> list[RequestOutput]:
        """minivllm's step, with the timeline told which step its events belong to."""
        self.timeline.step += 1
        return super().step()

    def generate(self, prompts, sampling_params: SamplingParams | Seq[SamplingParams] | None = None,
                 use_tqdm: bool = False) -> list[RequestOutput]:
        """minivllm's generate; an empty batch is a ValueError (on every rank: nothing was sent)."""
        if not isinstance(prompts, str) and len(prompts) == 0:
            raise ValueError("empty batch: generate() needs at least one prompt")
        return super().generate(prompts, sampling_params, use_tqdm)

    def events(self) -> list[dict]:
        """This rank's recorded events as plain dicts (Timeline.as_dicts)."""
        return self.timeline.as_dicts()
