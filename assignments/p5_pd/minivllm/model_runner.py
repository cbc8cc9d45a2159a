"""Executes a step: owns the model weights and the paged KV pool, builds the batch, samples.

The KV pool is one tensor allocated once: (num_layers, 2, num_blocks + 1, block_size, num_kv_heads,
head_dim). The block manager hands out blocks 0..num_blocks-1; the last one is scratch space for the
padded rows of CUDA-graph decode steps. num_blocks is `EngineConfig.num_kv_blocks`, or on CUDA
whatever `gpu_memory_utilization` of the device's memory leaves after the weights, the activations
of a full-budget step and those of the decode graphs.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import kvcache
import numpy as np
import torch
from torch import Tensor

from .attention import AttentionMetadata
from .config import EngineConfig, ModelConfig
from .cuda_graph import DecodeGraphs
from .model import LlamaForCausalLM, load_weights
from .sampler import sample
from .sampling_params import SamplingParams

_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


@dataclass
class ModelInput:
    """One step's model input, built by `ModelRunner.prepare` from a `kvcache.Batch`.

    input_ids: (T,) int64, the fed tokens of the batch's entries, entry after entry (in row order,
        see `prepare`).
    positions: (T,) int64, each token's position in its sequence.
    attn: slots, lengths and block tables (see AttentionMetadata).
    logits_indices: (S,) int64, the row of the last token of each entry that samples.
    sample_seq_ids: the seq_id of each of those S entries, in the same order.
    """

    input_ids: Tensor
    positions: Tensor
    attn: AttentionMetadata
    logits_indices: Tensor
    sample_seq_ids: list[int]


class ModelRunner:
    def __init__(self, model_path: str | Path, model_config: ModelConfig, config: EngineConfig,
                 max_model_len: int) -> None:
        self.config, self.model_config = config, model_config
        self.block_size = config.block_size
        self.max_model_len = max_model_len
        cuda = torch.cuda.is_available() if config.device == "auto" else config.device == "cuda"
        if cuda and not torch.cuda.is_available():
            raise ValueError("device='cuda' but CUDA is not available")
        self.device = torch.device("cuda" if cuda else "cpu")
        self.dtype = _DTYPES[config.dtype] if config.dtype != "auto" else torch.bfloat16 if cuda else torch.float32
        backend = config.attention_backend if config.attention_backend != "auto" else "triton" if cuda else "torch"
        self.model = LlamaForCausalLM.build(model_config, backend, self.device, self.dtype)
        load_weights(self.model, model_path)
        self.use_graphs = cuda and backend == "triton" and not config.enforce_eager
        self.num_kv_blocks = config.num_kv_blocks or self._blocks_that_fit()
        m = model_config
        self.kv_cache = torch.zeros(m.num_layers, 2, self.num_kv_blocks + 1, self.block_size, m.num_kv_heads,
                                    m.head_dim, dtype=self.dtype, device=self.device)
        self.graphs = self._capture_graphs() if self.use_graphs else None

    @property
    def kv_bytes_per_token(self) -> int:
        return self.model_config.kv_elements_per_token * self.dtype.itemsize

    @property
    def weight_bytes(self) -> int:
        # buffers too: a quantized linear keeps its packed weights as buffers
        return sum(t.numel() * t.element_size() for t in (*self.model.parameters(), *self.model.buffers()))

    def _blocks_that_fit(self) -> int:
        """CPU: room for max_num_seqs sequences of max_model_len. CUDA: what the memory fraction leaves."""
        per_seq = -(-self.max_model_len // self.block_size)
        if self.device.type == "cpu":
            return self.config.max_num_seqs * per_seq
        block_bytes = self.block_size * self.kv_bytes_per_token
        peak_activations = self._warmup()
        free, total = torch.cuda.mem_get_info(self.device)
        budget = total * self.config.gpu_memory_utilization - (total - free) - peak_activations
        num_blocks = int(budget // block_bytes) - 1  # the scratch block
        if num_blocks < per_seq:
            raise ValueError(f"gpu_memory_utilization={self.config.gpu_memory_utilization} leaves room for "
                             f"{max(num_blocks, 0)} KV blocks, fewer than one sequence of max_model_len needs")
        return num_blocks

    @torch.inference_mode()
    def _warmup(self) -> int:
        """Runs one full-budget prefill on a scratch cache, and one decode of max_num_seqs rows when
        decode graphs will be captured (their memory pool is private); returns the activation bytes
        to set aside: the prefill's peak plus the decode's. The prefill's chunks sit at the end of
        max_model_len contexts: attention scores grow with query rows times context length."""
        n = min(self.config.max_num_batched_tokens, self.max_model_len)
        seqs = max(1, min(self.config.max_num_seqs, self.config.max_num_batched_tokens // n))
        blocks = -(-self.max_model_len // self.block_size)
        m, dev = self.model_config, self.device
        cache = torch.zeros(m.num_layers, 2, seqs * blocks, self.block_size, m.num_kv_heads, m.head_dim,
                            dtype=self.dtype, device=dev)
        tables = torch.arange(seqs * blocks, dtype=torch.int32, device=dev).view(seqs, blocks)
        meta = AttentionMetadata(
            slot_mapping=torch.cat([torch.arange(n, device=dev) + s * blocks * self.block_size for s in range(seqs)]),
            query_start_loc=torch.arange(seqs + 1, dtype=torch.int32, device=dev) * n,
            context_lens=torch.full((seqs,), self.max_model_len, dtype=torch.int32, device=dev),
            block_tables=tables, query_lens_cpu=[n] * seqs, context_lens_cpu=[self.max_model_len] * seqs)
        ids = torch.zeros(seqs * n, dtype=torch.long, device=dev)
        peak = _peak_bytes(lambda: self.model.compute_logits(
            self.model(ids, torch.arange(n, device=dev).repeat(seqs), meta, cache)[-seqs:]), dev)
        if self.use_graphs:
            rows = self.config.max_num_seqs
            decode = AttentionMetadata(
                slot_mapping=torch.zeros(rows, dtype=torch.long, device=dev),
                query_start_loc=torch.arange(rows + 1, dtype=torch.int32, device=dev),
                context_lens=torch.ones(rows, dtype=torch.int32, device=dev),
                block_tables=torch.zeros(rows, 1, dtype=torch.int32, device=dev),
                query_lens_cpu=[1] * rows, context_lens_cpu=[1] * rows)
            zeros = torch.zeros(rows, dtype=torch.long, device=dev)
            peak += _peak_bytes(lambda: self.model.compute_logits(self.model(zeros, zeros, decode, cache)), dev)
        del cache
        torch.cuda.empty_cache()
        return peak

    def _capture_graphs(self) -> DecodeGraphs | None:
        """Decode graphs for batches up to max_num_seqs; None (eager decode, with a warning) when the
        forward cannot be captured, e.g. because a step reads a device value on the host."""
        try:
            with torch.inference_mode():
                return DecodeGraphs(self.model, self.kv_cache, self.config.max_num_seqs,
                                    -(-self.max_model_len // self.block_size))
        except RuntimeError as err:
            warnings.warn(f"decode CUDA graphs could not be captured, decoding eagerly: {err}", stacklevel=2)
            torch.cuda.synchronize(self.device)
            return None

    def prepare(self, batch: kvcache.Batch) -> ModelInput:
        """Flattens a step's entries into one varlen batch.

        Row order: the entries with num_tokens == 1 first, then the others, each group in the
        batch's order (the leading one-token rows can take the decode kernel: see
        `AttentionMetadata.num_decodes`). An entry feeds its token_ids at positions start_pos ..
        start_pos + num_tokens - 1 through its slot_mapping; its query length is num_tokens and its
        context length start_pos + num_tokens; its block-table row is its block_table padded with 0
        to the longest table in the batch. An entry that samples gives the row of its last token to
        logits_indices and its seq_id to sample_seq_ids. Tensors go to the runner's device (int64
        ids, positions, slots and logits indices; int32 for the rest).
        """
        dev = self.device
        entries = [e for e in batch.entries if e.num_tokens == 1] + [e for e in batch.entries if e.num_tokens != 1]
        input_ids: list[int] = []
        positions: list[int] = []
        slots: list[int] = []
        logits_indices: list[int] = []
        sample_seq_ids: list[int] = []
        for e in entries:
            input_ids.extend(e.token_ids)
            positions.extend(range(e.start_pos, e.start_pos + e.num_tokens))
            slots.extend(e.slot_mapping)
            if e.samples:
                logits_indices.append(len(input_ids) - 1)
                sample_seq_ids.append(e.seq_id)
        query_lens = [e.num_tokens for e in entries]
        context_lens = [e.start_pos + e.num_tokens for e in entries]
        width = max(len(e.block_table) for e in entries)
        tables = np.zeros((len(entries), width), dtype=np.int32)  # numpy fills rows ~3x faster than torch.tensor
        for row, e in enumerate(entries):
            tables[row, :len(e.block_table)] = e.block_table
        starts = [0]
        for q in query_lens:
            starts.append(starts[-1] + q)
        meta = AttentionMetadata(
            slot_mapping=torch.tensor(slots, dtype=torch.long, device=dev),
            query_start_loc=torch.tensor(starts, dtype=torch.int32, device=dev),
            context_lens=torch.tensor(context_lens, dtype=torch.int32, device=dev),
            block_tables=torch.from_numpy(tables).to(dev),
            query_lens_cpu=query_lens,
            context_lens_cpu=context_lens,
        )
        return ModelInput(
            input_ids=torch.tensor(input_ids, dtype=torch.long, device=dev),
            positions=torch.tensor(positions, dtype=torch.long, device=dev),
            attn=meta,
            logits_indices=torch.tensor(logits_indices, dtype=torch.long, device=dev),
            sample_seq_ids=sample_seq_ids,
        )

    @torch.inference_mode()
    def run(self, batch: kvcache.Batch,
            sampling: Mapping[int, tuple[SamplingParams, torch.Generator | None]]) -> dict[int, int]:
        """One forward over the batch's tokens; returns {seq_id: sampled token} for the entries that
        sample. sampling: the SamplingParams and generator of (at least) each sampling entry's
        request, by seq_id. A pure decode step replays a CUDA graph when the runner has them."""
        inp = self.prepare(batch)
        meta = inp.attn
        if self.graphs is not None and self.graphs.can_run(meta):
            logits = self.graphs.run(inp.input_ids, inp.positions, meta)[inp.logits_indices]
        else:
            hidden = self.model(inp.input_ids, inp.positions, meta, self.kv_cache)
            if not inp.sample_seq_ids:
                return {}
            logits = self.model.compute_logits(hidden[inp.logits_indices])
        params = [sampling[seq_id][0] for seq_id in inp.sample_seq_ids]
        generators = [sampling[seq_id][1] for seq_id in inp.sample_seq_ids]
        return dict(zip(inp.sample_seq_ids, sample(logits, params, generators)))


def _peak_bytes(fn, device: torch.device) -> int:
    """Peak bytes allocated on `device` while fn() runs, above what was allocated before."""
    torch.cuda.synchronize(device)
    torch.cuda.reset_peak_memory_stats(device)
    before = torch.cuda.memory_allocated(device)
    fn()
    torch.cuda.synchronize(device)
    return torch.cuda.max_memory_allocated(device) - before
