"""A paper plan of a TP x PP decode deployment (Llama-3-70B with TP=8 in a node, PP=2 across two
nodes): per-GPU memory, bytes per decode step over NVLink and over the network, and the decode step
time of an alpha-beta model. Every quantity is defined in the docstrings; the handout repeats them.

Conventions: stage s holds layers stage_layers(L, pp, s) (earlier stages take the extra layer); a
vocab-parallel embedding on stage 0 and LM head on the last stage (with tied embeddings both ends
still hold their slice, once when pp = 1); KV heads per GPU = num_kv_heads / tp, or 1 when tp >
num_kv_heads (replicated); norms replicated. All-reduce and all-gather are rings on NVLink."""

from __future__ import annotations

from dataclasses import dataclass

from .sharding import stage_layers


@dataclass(frozen=True)
class Hardware:
    """Stated bandwidths (bytes/s, one direction, per GPU) and per-message latencies (s) of H100 nodes:
    HBM3 3.35 TB/s; NVLink 4 at 450 GB/s a direction; one 400 Gb/s NIC per GPU, 50 GB/s."""

    hbm_bytes_per_s: float = 3.35e12
    nvlink_bytes_per_s: float = 450e9
    nvlink_alpha_s: float = 5e-6
    network_bytes_per_s: float = 50e9
    network_alpha_s: float = 10e-6
    gpu_memory_bytes: float = 80e9

    def __post_init__(self) -> None:
        for name, value in (("hbm_bytes_per_s", self.hbm_bytes_per_s), ("nvlink_bytes_per_s", self.nvlink_bytes_per_s),
                            ("nvlink_alpha_s", self.nvlink_alpha_s), ("network_bytes_per_s", self.network_bytes_per_s),
                            ("network_alpha_s", self.network_alpha_s), ("gpu_memory_bytes", self.gpu_memory_bytes)):
            if value <= 0:
                raise ValueError(f"{name} must be > 0, got {value}")


@dataclass(frozen=True)
class PlanResult:
    """Per stage s (tuples of length pp):
    layers: decoder layers of stage s.
    weight_bytes: parameter bytes one GPU of stage s holds.
    kv_bytes: KV bytes one GPU of stage s holds for `batch` sequences of `context` tokens.
    nvlink_bytes: bytes one GPU of stage s sends over NVLink in one decode step (ring all-reduce:
        2 (tp-1)/tp x message; ring all-gather: (tp-1)/tp x the gathered output), per message:
        one (batch, hidden) all-reduce per layer-half and one for the embedding on stage 0; the
        last stage's logits all-gather of (batch, vocab) in the model dtype.
    Totals:
    network_bytes: bytes crossing between stages in one decode step: each of the tp GPUs of a stage
        sends the whole (batch, hidden) activation to its peer, at each of the pp - 1 boundaries
        (the sampled tokens sent back, 8 bytes a sequence, are left out).
    step_time_s: one decode step through every stage, without micro-batches: the sum over stages of
        (weight_bytes - the embedding's slice + kv_bytes) / HBM bandwidth (a memory-bound step reads
        every weight and the whole KV once; the embedding is only looked up), plus each ring
        collective's alpha-beta time (all-reduce 2 (tp-1) alpha + 2 (tp-1)/tp m / B, all-gather
        (tp-1) alpha + (tp-1)/tp m / B), plus alpha + m / B of the network per boundary.
    fits: every GPU's weight_bytes + kv_bytes <= the GPU's memory.
    """

    layers: tuple[int, ...]
    weight_bytes: tuple[int, ...]
    kv_bytes: tuple[int, ...]
    nvlink_bytes: tuple[float, ...]
    network_bytes: int
    step_time_s: float
    fits: bool


def _stage_weights(cfg: dict, tp: int, layers: int, first: bool, last: bool, nbytes: int) -> tuple[int, int]:
    """(parameter bytes one GPU of the stage holds, of which the embedding slice)."""
    raise NotImplementedError("p2.16: _stage_weights")


def plan_deployment(cfg: dict, *, tp: int, pp: int, batch: int, context: int, dtype_bytes: int = 2,
                    hw: Hardware = Hardware()) -> PlanResult:
    """The plan of `cfg` (an HF config.json as a dict) on pp stages of tp GPUs, decoding `batch`
    sequences of `context` tokens each (KV in the model dtype). See PlanResult for every definition."""
    if min(tp, pp, batch, context, dtype_bytes) < 1:
        raise ValueError(f"tp, pp, batch, context, dtype_bytes must be >= 1, got {tp}, {pp}, {batch}, {context}, "
                         f"{dtype_bytes}")
    raise NotImplementedError("p2.17: plan_deployment")
