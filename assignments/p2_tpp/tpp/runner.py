"""Executes a step on this rank: its stage of the tensor-parallel model, its shard of the paged KV
pool, the step's batch cut into micro-batches that flow through the stages, and the sampling.

KV pool: (stage layers, 2, num_blocks + 1, block_size, this rank's KV heads, head_dim), the same
block ids on every rank (every rank runs the same scheduler on the same requests), so one block
table addresses every rank's shard."""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import kvcache
import torch
from minivllm import EngineConfig, ModelConfig, ModelInput, ModelRunner, SamplingParams, sample
from minivllm.cuda_graph import DecodeGraphs
from minivllm.model import LlamaForCausalLM, load_weights

from .comm import Comm
from .model import StageModel

_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


@dataclass(frozen=True)
class MicroBatch:
    """Entries of one micro-batch: what ModelRunner.prepare reads (a kvcache.Batch's `entries`)."""

    entries: tuple[kvcache.BatchEntry, ...]


def split_microbatches(entries: Sequence[kvcache.BatchEntry], count: int) -> list[MicroBatch]:
    """The entries in order, cut into min(count, len(entries)) contiguous micro-batches whose sizes
    differ by at most one, the larger ones first (as torch.tensor_split cuts)."""
    raise NotImplementedError("p2.18: split_microbatches")


def sampling_order(entries: Sequence[kvcache.BatchEntry]) -> list[int]:
    """seq_ids of the sampling entries in the order one process samples them (ModelRunner.prepare's
    rows: one-token entries first, then the others): a shared generator draws in that order."""
    raise NotImplementedError("p2.19: sampling_order")


class ParallelRunner:
    """ModelRunner's role on one rank of a TP x PP grid (same `run` contract, same `kv_cache` layout
    per rank, so minivllm's LLM.step drives it unchanged)."""

    def __init__(self, model_path: str | Path, model_config: ModelConfig, config: EngineConfig,
                 max_model_len: int, comm: Comm) -> None:
        self.config, self.model_config, self.comm = config, model_config, comm
        self.block_size, self.max_model_len = config.block_size, max_model_len
        cuda = torch.cuda.is_available() if config.device == "auto" else config.device == "cuda"
        self.device = torch.device("cuda" if cuda else "cpu")
        self.dtype = _DTYPES[config.dtype] if config.dtype != "auto" else torch.bfloat16 if cuda else torch.float32
        backend = config.attention_backend if config.attention_backend != "auto" else "triton" if cuda else "torch"
        full = LlamaForCausalLM.build(model_config, backend, self.device, self.dtype)
        load_weights(full, model_path)
        self.model = StageModel(full, comm).eval()
        del full
        per_seq = -(-max_model_len // self.block_size)
        self.num_kv_blocks = config.num_kv_blocks or config.max_num_seqs * per_seq
        m = self.model
        self.kv_cache = torch.zeros(m.end - m.start, 2, self.num_kv_blocks + 1, self.block_size, m.num_kv_heads,
                                    model_config.head_dim, dtype=self.dtype, device=self.device)
        self.graphs = self._decode_graphs(backend)

    def _decode_graphs(self, backend: str) -> DecodeGraphs | None:
        """P1's decode CUDA graphs (given), for a world of one only: there the step has no
        communication, so the TP=1 path decodes as fast as P1's engine instead of paying a launch per
        kernel. With tp * pp > 1 gloo cannot be captured (and NCCL graphs are the two-GPU issue's),
        and a recorded timeline needs its spans on every step, so both decode eagerly."""
        if (self.device.type != "cuda" or backend != "triton" or self.config.enforce_eager
                or self.comm.cfg.world_size > 1 or self.comm.timeline.enabled):
            return None
        try:
            with torch.inference_mode():
                return DecodeGraphs(self.model, self.kv_cache, self.config.max_num_seqs,
                                    -(-self.max_model_len // self.block_size))
        except RuntimeError as err:  # e.g. a forward that reads a device value on the host
            warnings.warn(f"decode CUDA graphs could not be captured, decoding eagerly: {err}", stacklevel=2)
            torch.cuda.synchronize(self.device)
            return None

    def prepare(self, batch) -> ModelInput:
        """minivllm's flattening of a batch (or micro-batch) of entries into one varlen input."""
        return ModelRunner.prepare(self, batch)

    @torch.inference_mode()
    def run(self, batch: kvcache.Batch,
            sampling: Mapping[int, tuple[SamplingParams, torch.Generator | None]]) -> dict[int, int]:
        """One step over the batch: {seq_id: token} for the sampling entries, the same on every rank.

        pp > 1: micro-batches flow stage to stage; a stage posts every receive first, then for each
        micro-batch waits for its input, computes, and posts the send of its output without waiting
        (so it computes micro-batch i + 1 while the next stage computes i). The last stage's tp ranks
        all gather the full logits and sample with the same generators (identical draws), then send
        the tokens back up their tp column."""
        count = self.comm.cfg.num_microbatches if self.comm.cfg.pp > 1 else 1
        inputs = [self.prepare(mb) for mb in split_microbatches(batch.entries, count)]
        if self.graphs is not None and len(inputs) == 1 and self.graphs.can_run(inputs[0].attn):
            inp = inputs[0]  # a pure decode step at world 1: one graph replay
            logits = [self.graphs.run(inp.input_ids, inp.positions, inp.attn)[inp.logits_indices]]
        else:
            logits = self._pipeline(inputs)
        order = sampling_order(batch.entries)
        tokens: list[int] = []
        if self.comm.is_last and order:
            raise NotImplementedError("p2.20: ParallelRunner.run")
        tokens = self.comm.broadcast_tokens(tokens, len(order), self.device)
        return dict(zip(order, tokens))

    def _pipeline(self, inputs: list[ModelInput]) -> list[torch.Tensor]:
        """Runs this stage over every micro-batch; returns the last stage's logits per micro-batch
        (rows of its sampling entries), nothing on the other stages."""
        comm, hidden = self.comm, self.model_config.hidden_size
        recvs = []
        if not comm.is_first:
            recvs = [comm.post_recv((len(inp.input_ids), hidden), self.dtype, self.device) for inp in inputs]
        sends, logits = [], []
        for i, inp in enumerate(inputs):
            comm.timeline.microbatch = i
            raise NotImplementedError("p2.21: ParallelRunner._pipeline")
        comm.timeline.microbatch = -1
        for _, works in sends:
            for work in works:
                work.wait()
        return logits
