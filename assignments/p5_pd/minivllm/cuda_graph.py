"""CUDA graphs of the decode step (given: how the engine stops paying per-kernel launch costs).

An eager decode step of a small model launches ~25 kernels per layer from Python; at a few
microseconds each the GPU mostly waits for the host. A CUDA graph records the whole forward once per
batch size and replays it with one launch. Graphs fix every tensor's address and shape, so a step
copies its inputs into static buffers and pads the batch to the next captured size; padded rows write
their K/V into a scratch block that no sequence owns and attend to that block's first slot only.

Only pure decode steps (one new token per sequence) replay a graph: they are most steps, and their
shapes depend on the batch size alone. Prefill and mixed steps run eagerly.
"""

from __future__ import annotations

import torch
from torch import Tensor

from .attention import AttentionMetadata


def capture_sizes(max_batch: int) -> list[int]:
    """Batch sizes to capture, as nano-vllm: 1, 2, 4, 8, then every multiple of 16, and max_batch."""
    sizes = [s for s in (1, 2, 4, 8) if s < max_batch] + list(range(16, max_batch, 16))
    return sizes + [max_batch]


class DecodeGraphs:
    """One captured decode forward (ids -> fp32 logits) per batch size, sharing one memory pool and
    one logits buffer.

    model: the LlamaForCausalLM; kv_cache: the pool (num_layers, 2, num_blocks, block_size, Hkv, D)
    whose last block is the scratch block; max_blocks: block-table width of the longest sequence.
    """

    def __init__(self, model, kv_cache: Tensor, max_batch: int, max_blocks: int) -> None:
        dev = kv_cache.device
        self.model, self.kv_cache = model, kv_cache
        self.scratch_block = kv_cache.shape[2] - 1
        self.scratch_slot = self.scratch_block * kv_cache.shape[3]
        self.input_ids = torch.zeros(max_batch, dtype=torch.long, device=dev)
        self.positions = torch.zeros(max_batch, dtype=torch.long, device=dev)
        self.slot_mapping = torch.full((max_batch,), self.scratch_slot, dtype=torch.long, device=dev)
        self.query_start_loc = torch.arange(max_batch + 1, dtype=torch.int32, device=dev)
        self.context_lens = torch.ones(max_batch, dtype=torch.int32, device=dev)
        self.block_tables = torch.full((max_batch, max_blocks), self.scratch_block, dtype=torch.int32, device=dev)
        # every graph writes its logits here: one buffer, not one per captured size in the graph pool
        self.logits = torch.empty(max_batch, model.lm_head.out_features, dtype=torch.float32, device=dev)
        self.graphs: dict[int, torch.cuda.CUDAGraph] = {}
        pool = None
        for bs in reversed(capture_sizes(max_batch)):  # largest first: smaller ones reuse its memory
            self._forward(bs)  # compiles kernels and picks cuBLAS algorithms outside the capture
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph, pool=pool):
                self._forward(bs)
            pool = pool or graph.pool()
            self.graphs[bs] = graph
        torch.cuda.synchronize(dev)
        self.sizes = sorted(self.graphs)

    def _forward(self, bs: int) -> None:
        meta = AttentionMetadata(
            slot_mapping=self.slot_mapping[:bs], query_start_loc=self.query_start_loc[:bs + 1],
            context_lens=self.context_lens[:bs], block_tables=self.block_tables[:bs],
            query_lens_cpu=[1] * bs, context_lens_cpu=[1] * bs,  # decode kernel: lengths come from the device
        )
        hidden = self.model(self.input_ids[:bs], self.positions[:bs], meta, self.kv_cache)
        self.logits[:bs].copy_(self.model.compute_logits(hidden))

    def can_run(self, meta: AttentionMetadata) -> bool:
        """A pure decode step of at most the largest captured size, with tables that fit the buffer."""
        return (meta.num_decodes == meta.num_seqs <= self.sizes[-1]
                and meta.block_tables.shape[1] <= self.block_tables.shape[1])

    def run(self, input_ids: Tensor, positions: Tensor, meta: AttentionMetadata) -> Tensor:
        """Replays the graph of the smallest captured size >= the batch; returns (B, vocab) fp32 logits
        (a view into the graph's output: read it before the next replay)."""
        b, width = input_ids.shape[0], meta.block_tables.shape[1]
        bs = next(s for s in self.sizes if s >= b)
        self.input_ids[:b].copy_(input_ids)
        self.positions[:b].copy_(positions)
        self.slot_mapping[:b].copy_(meta.slot_mapping)
        self.context_lens[:b].copy_(meta.context_lens)
        self.block_tables[:b, :width].copy_(meta.block_tables)
        if bs > b:  # padding rows: write to and read from the scratch block only
            self.slot_mapping[b:bs].fill_(self.scratch_slot)
            self.context_lens[b:bs].fill_(1)
            self.block_tables[b:bs, 0].fill_(self.scratch_block)
        self.graphs[bs].replay()
        return self.logits[:b]
