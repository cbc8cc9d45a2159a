"""Memory per GPU of a dense decoder (LLaMA, Mistral, Qwen2 configs) trained with DP x TP x PP and
ZeRO, in bytes, from its Hugging Face config.json.

Placement. Pipeline stage s holds layers shard_range(L, s, pp) (tensor_split's rule); stage 0 also
the token embedding, the last stage the final norm and the output layer (with tied embeddings and
pp > 1 the last stage keeps its own copy, as Megatron does; with pp = 1 it is shared). Tensor
parallelism splits the attention and MLP projections (and the q/k/v biases) by tp, the embedding
and the output layer by vocabulary (the rank with the most rows: ceil(V / tp)); norms and the
output projection's bias are whole on every rank. We report tensor-parallel rank 0.

Mixed-precision Adam (ZeRO paper, K = 12): weights in param_bytes, gradients in grad_bytes, and in
the optimizer an fp32 master copy (master_bytes) plus two fp32 moments (adam_state_bytes), per
parameter. ZeRO shards over the dp replicas of a rank's N parameters, ceil(N / dp) each: stage 1
the optimizer, stage 2 also the gradients, stage 3 also the weights.

Activations kept for backward, per token of a micro-batch, per layer, on one TP rank (FlashAttention,
no dropout, no recomputation, no sequence parallelism), in act_bytes unless marked fp32:
    whole on every rank: attention-norm input (h), its output (h, saved by the q/k/v projections),
                         MLP-norm input (h), its output (h, saved by gate and up)
    split by tp:         q after RoPE (a*d), k after RoPE and v (kv*d each), attention output
                         (a*d, saved by o_proj), gate output, SiLU(gate), up output and
                         SiLU(gate)*up (intermediate each)
    fp32:                one 1/rms per norm (2, whole), a logsumexp per head (a, split)
The last stage also keeps the final-norm input and output (h each), its 1/rms (fp32), and the
loss's softmax over its vocabulary shard (ceil(V / tp), fp32). A stage holds the activations of
the micro-batches in flight: all m with AFAB, min(pp - s, m) with 1F1B.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

from .tensor_parallel import shard_range

DENSE_TYPES = ("llama", "mistral", "qwen2")
FP32 = 4


@dataclass(frozen=True)
class TrainingPlan:
    """One training configuration: parallel degrees, ZeRO stage, batch shape, byte widths."""

    dp: int = 1
    tp: int = 1
    pp: int = 1
    zero_stage: int = 0  # 0 (none), 1 (optimizer), 2 (+ gradients), 3 (+ weights)
    micro_batch_size: int = 1  # sequences per micro-batch
    seq_len: int = 4096
    num_microbatches: int = 1  # per step and pipeline
    schedule: str = "1f1b"  # or "afab"
    param_bytes: int = 2  # bf16 weights
    grad_bytes: int = 2
    master_bytes: int = 4  # fp32 master weights (0: none, e.g. pure fp32 training)
    adam_state_bytes: int = 8  # two fp32 moments
    act_bytes: int = 2

    def __post_init__(self) -> None:
        for name in ("dp", "tp", "pp", "micro_batch_size", "seq_len", "num_microbatches", "param_bytes",
                     "grad_bytes", "act_bytes"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"TrainingPlan.{name} must be a positive int, got {value!r}")
        for name in ("master_bytes", "adam_state_bytes"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"TrainingPlan.{name} must be an int >= 0, got {value!r}")
        if self.zero_stage not in (0, 1, 2, 3):
            raise ValueError(f"TrainingPlan.zero_stage must be 0, 1, 2 or 3, got {self.zero_stage!r}")
        if self.schedule not in ("1f1b", "afab"):
            raise ValueError(f"TrainingPlan.schedule must be '1f1b' or 'afab', got {self.schedule!r}")


@dataclass(frozen=True)
class MemoryBreakdown:
    """Bytes one GPU holds."""

    weights: int
    gradients: int
    optimizer: int
    activations: int

    @property
    def total(self) -> int:
        return self.weights + self.gradients + self.optimizer + self.activations


class ModelShape(NamedTuple):
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int
    layers: int
    vocab: int
    tied: bool
    qkv_bias: bool
    o_bias: bool


def model_shape(config: dict) -> ModelShape:
    """The sizes the memory model needs from a config.json dict (ValueError for a non-dense model)."""
    kind = config.get("model_type")
    if kind not in DENSE_TYPES:
        raise ValueError(f"model_type {kind!r}: the memory model covers dense decoders {DENSE_TYPES}")
    h, heads = config["hidden_size"], config["num_attention_heads"]
    return ModelShape(
        hidden=h, heads=heads, kv_heads=config.get("num_key_value_heads") or heads,
        head_dim=config.get("head_dim") or h // heads, intermediate=config["intermediate_size"],
        layers=config["num_hidden_layers"], vocab=config["vocab_size"],
        tied=bool(config.get("tie_word_embeddings", False)),
        qkv_bias=kind == "qwen2" or bool(config.get("attention_bias", False)),
        o_bias=bool(config.get("attention_bias", False)))


def _check(shape: ModelShape, plan: TrainingPlan, stage: int) -> None:
    for name, n in (("num_attention_heads", shape.heads), ("num_key_value_heads", shape.kv_heads),
                    ("intermediate_size", shape.intermediate)):
        if n % plan.tp != 0:
            raise ValueError(f"tp={plan.tp} must divide {name}={n}")
    if plan.pp > shape.layers:
        raise ValueError(f"pp={plan.pp} exceeds the {shape.layers} layers")
    if isinstance(stage, bool) or not isinstance(stage, int) or not 0 <= stage < plan.pp:
        raise ValueError(f"stage must be in [0, {plan.pp}), got {stage!r}")


def parameters_per_rank(config: dict, plan: TrainingPlan, stage: int = 0) -> int:
    """Parameters held by tensor-parallel rank 0 of pipeline stage `stage`, before ZeRO."""
    shape = model_shape(config)
    _check(shape, plan, stage)
    raise NotImplementedError("s02.3: parameters_per_rank")


def microbatches_in_flight(plan: TrainingPlan, stage: int) -> int:
    """Micro-batches whose activations stage `stage` holds at its peak: m under AFAB,
    min(pp - stage, m) under 1F1B."""
    raise NotImplementedError("s02.4: microbatches_in_flight")


def activation_bytes_per_microbatch(config: dict, plan: TrainingPlan, stage: int = 0) -> int:
    """Bytes of activations stage `stage` keeps for one micro-batch (see the module docstring)."""
    shape = model_shape(config)
    _check(shape, plan, stage)
    raise NotImplementedError("s02.5: activation_bytes_per_microbatch")


def memory_per_rank(config: dict, plan: TrainingPlan, stage: int = 0) -> MemoryBreakdown:
    """Weights, gradients, optimizer states and activations (bytes) of TP rank 0 of `stage`."""
    raise NotImplementedError("s02.6: memory_per_rank")
