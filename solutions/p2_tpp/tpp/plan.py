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
    # BEGIN SOLUTION
    h, inter, vocab = cfg["hidden_size"], cfg["intermediate_size"], cfg["vocab_size"]
    heads, kv = cfg["num_attention_heads"], cfg.get("num_key_value_heads") or cfg["num_attention_heads"]
    d = cfg.get("head_dim") or h // heads
    kv_per_gpu = max(kv // tp, 1)
    per_layer = 2 * h * heads * d // tp + 2 * h * kv_per_gpu * d + 3 * h * inter // tp + 2 * h
    embed = vocab * h // tp if first else 0
    head = vocab * h // tp + h if last else 0  # LM head slice and the final norm
    if last and first and cfg.get("tie_word_embeddings"):
        head -= vocab * h // tp  # one tensor when both ends share a GPU
    return (layers * per_layer + embed + head) * nbytes, embed * nbytes
    # END SOLUTION


def plan_deployment(cfg: dict, *, tp: int, pp: int, batch: int, context: int, dtype_bytes: int = 2,
                    hw: Hardware = Hardware()) -> PlanResult:
    """The plan of `cfg` (an HF config.json as a dict) on pp stages of tp GPUs, decoding `batch`
    sequences of `context` tokens each (KV in the model dtype). See PlanResult for every definition."""
    if min(tp, pp, batch, context, dtype_bytes) < 1:
        raise ValueError(f"tp, pp, batch, context, dtype_bytes must be >= 1, got {tp}, {pp}, {batch}, {context}, "
                         f"{dtype_bytes}")
    # BEGIN SOLUTION
    h, vocab = cfg["hidden_size"], cfg["vocab_size"]
    heads, kv = cfg["num_attention_heads"], cfg.get("num_key_value_heads") or cfg["num_attention_heads"]
    d = cfg.get("head_dim") or h // heads
    act = batch * h * dtype_bytes
    logits = batch * vocab * dtype_bytes
    ring = (tp - 1) / tp
    layers, weights, kvs, nvlink, time_s = [], [], [], [], 0.0
    for s in range(pp):
        start, end = stage_layers(cfg["num_hidden_layers"], pp, s)
        n, first, last = end - start, s == 0, s == pp - 1
        w, embed = _stage_weights(cfg, tp, n, first, last, dtype_bytes)
        kv_bytes = batch * context * 2 * n * max(kv // tp, 1) * d * dtype_bytes
        reduces = 2 * n + (1 if first else 0)
        sent = reduces * 2 * ring * act + (ring * logits if last else 0.0)
        time_s += (w - embed + kv_bytes) / hw.hbm_bytes_per_s
        if tp > 1:
            time_s += reduces * (2 * (tp - 1) * hw.nvlink_alpha_s + 2 * ring * act / hw.nvlink_bytes_per_s)
            if last:
                time_s += (tp - 1) * hw.nvlink_alpha_s + ring * logits / hw.nvlink_bytes_per_s
        layers.append(n)
        weights.append(w)
        kvs.append(kv_bytes)
        nvlink.append(sent if tp > 1 else 0.0)
    time_s += (pp - 1) * (hw.network_alpha_s + act / hw.network_bytes_per_s)
    fits = all(w + k <= hw.gpu_memory_bytes for w, k in zip(weights, kvs))
    return PlanResult(tuple(layers), tuple(weights), tuple(kvs), tuple(nvlink), (pp - 1) * tp * act, time_s, fits)
    # END SOLUTION
