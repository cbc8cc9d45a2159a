"""Typed configuration: what the engine is asked to do (EngineConfig) and what the model is (ModelConfig)."""

from __future__ import annotations

import json
from dataclasses import dataclass, fields
from pathlib import Path

_DTYPES = ("auto", "float32", "bfloat16", "float16")
_DEVICES = ("auto", "cpu", "cuda")
_BACKENDS = ("auto", "torch", "triton")
_POLICIES = ("decode_first", "prefill_first")


@dataclass
class EngineConfig:
    """Knobs of the engine. Every field can be passed as a keyword to `LLM(model_path, **config)`.

    block_size: tokens per KV block (a power of two).
    num_kv_blocks: size of the paged KV pool in blocks; None sizes it from `gpu_memory_utilization`
        on CUDA, and on CPU gives every one of `max_num_seqs` sequences room for `max_model_len` tokens.
    gpu_memory_utilization: fraction of the device's total memory this engine may hold in all
        (weights, activations and the KV pool), as in vLLM.
    max_num_seqs: most sequences running at once (the decode batch size limit).
    max_num_batched_tokens: most tokens (prefill + decode) computed in one step.
    max_model_len: longest sequence (prompt + output); None takes the model's max_position_embeddings.
    enable_chunked_prefill: a prompt may be split over several steps to fit the token budget.
        When off, a prompt is prefilled in one step, so the budget must hold `max_model_len` tokens.
    enable_prefix_caching: full KV blocks are shared between sequences with the same token prefix.
    scheduling_policy: "decode_first" (SARATHI, vLLM v1: every running decode gets its token, then
        prefill chunks fill the budget) or "prefill_first" (vLLM v0: a step holds only prefill work
        whenever there is any, so running decodes stall behind it); see kvcache.SchedulerConfig.
    dtype: "float32", "bfloat16", "float16", or "auto" (float32 on CPU, bfloat16 on CUDA).
    device: "cpu", "cuda", or "auto" (CUDA when available).
    attention_backend: "torch" (gather path everywhere), "triton" (paged-decode kernel for decode
        rows, CUDA only), or "auto" (triton on CUDA, torch on CPU).
    enforce_eager: never capture CUDA graphs (as in vLLM). Otherwise, on CUDA with the triton backend,
        pure decode steps of up to max_num_seqs sequences replay captured graphs.
    debug_check_invariants: after every step, check the block manager's invariants (slow).
    seed: seed of the generator used by requests that sample without their own seed.
    """

    block_size: int = 16
    num_kv_blocks: int | None = None
    gpu_memory_utilization: float = 0.9
    max_num_seqs: int = 256
    max_num_batched_tokens: int = 8192
    max_model_len: int | None = None
    enable_chunked_prefill: bool = True
    enable_prefix_caching: bool = True
    scheduling_policy: str = "decode_first"
    dtype: str = "auto"
    device: str = "auto"
    attention_backend: str = "auto"
    enforce_eager: bool = False
    debug_check_invariants: bool = False
    seed: int = 0

    def __post_init__(self) -> None:
        if self.block_size < 1 or self.block_size & (self.block_size - 1):
            raise ValueError(f"block_size must be a power of two, got {self.block_size}")
        if self.num_kv_blocks is not None and self.num_kv_blocks < 1:
            raise ValueError(f"num_kv_blocks must be >= 1 or None, got {self.num_kv_blocks}")
        if not 0.0 < self.gpu_memory_utilization <= 1.0:
            raise ValueError(f"gpu_memory_utilization must be in (0, 1], got {self.gpu_memory_utilization}")
        if self.max_num_seqs < 1:
            raise ValueError(f"max_num_seqs must be >= 1, got {self.max_num_seqs}")
        if self.max_num_batched_tokens < 1:
            raise ValueError(f"max_num_batched_tokens must be >= 1, got {self.max_num_batched_tokens}")
        if self.max_model_len is not None and self.max_model_len < 2:
            raise ValueError(f"max_model_len must be >= 2 or None, got {self.max_model_len}")
        if self.scheduling_policy not in _POLICIES:
            raise ValueError(f"scheduling_policy must be one of {_POLICIES}, got {self.scheduling_policy!r}")
        if self.dtype not in _DTYPES:
            raise ValueError(f"dtype must be one of {_DTYPES}, got {self.dtype!r}")
        if self.device not in _DEVICES:
            raise ValueError(f"device must be one of {_DEVICES}, got {self.device!r}")
        if self.attention_backend not in _BACKENDS:
            raise ValueError(f"attention_backend must be one of {_BACKENDS}, got {self.attention_backend!r}")

    @classmethod
    def from_kwargs(cls, **kwargs) -> EngineConfig:
        """Builds a config from keywords, with a ValueError naming any unknown key."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(kwargs) - known)
        if unknown:
            raise ValueError(f"unknown engine option(s) {unknown}; known: {sorted(known)}")
        return cls(**kwargs)


@dataclass(frozen=True)
class ModelConfig:
    """The LLaMA hyper-parameters read from an HF `config.json`."""

    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    rms_norm_eps: float
    rope_theta: float
    max_position_embeddings: int
    tie_word_embeddings: bool
    eos_token_ids: tuple[int, ...]
    quant_method: str | None = None  # config.json's quantization_config.quant_method ("gptq"), None for FP weights

    def __post_init__(self) -> None:
        if self.num_heads % self.num_kv_heads:
            raise ValueError(f"num_heads {self.num_heads} is not a multiple of num_kv_heads {self.num_kv_heads}")

    @property
    def kv_elements_per_token(self) -> int:
        """K and V elements one token adds to the cache over all layers: 2 * layers * kv_heads * head_dim.

        Times the dtype's bytes, this is the KV bytes per token."""
        return 2 * self.num_layers * self.num_kv_heads * self.head_dim

    @classmethod
    def from_pretrained(cls, model_path: str | Path) -> ModelConfig:
        """Reads `model_path/config.json` of a LlamaForCausalLM (transformers 4 or 5 layout)."""
        path = Path(model_path) / "config.json"
        if not path.is_file():
            raise ValueError(f"no config.json in {model_path}")
        cfg = json.loads(path.read_text())
        arch = cfg.get("model_type", "llama")
        if arch != "llama":
            raise ValueError(f"only LLaMA models are supported, got model_type={arch!r}")
        # transformers 5 keeps RoPE settings in `rope_parameters`, transformers 4 in `rope_theta`/`rope_scaling`.
        rope = cfg.get("rope_parameters") or cfg.get("rope_scaling") or {}
        rope_type = rope.get("rope_type", rope.get("type", "default"))
        if rope_type != "default":
            raise ValueError(f"only the default RoPE is supported, got rope_type={rope_type!r}")
        if cfg.get("attention_bias") or cfg.get("mlp_bias"):
            raise ValueError("LLaMA variants with attention or MLP biases are not supported")
        eos = cfg.get("eos_token_id")
        eos_ids = () if eos is None else tuple(eos) if isinstance(eos, list) else (int(eos),)
        heads = cfg["num_attention_heads"]
        return cls(
            vocab_size=cfg["vocab_size"],
            hidden_size=cfg["hidden_size"],
            intermediate_size=cfg["intermediate_size"],
            num_layers=cfg["num_hidden_layers"],
            num_heads=heads,
            num_kv_heads=cfg.get("num_key_value_heads") or heads,
            head_dim=cfg.get("head_dim") or cfg["hidden_size"] // heads,
            rms_norm_eps=cfg.get("rms_norm_eps", 1e-6),
            rope_theta=float(rope.get("rope_theta", cfg.get("rope_theta", 10000.0))),
            max_position_embeddings=cfg.get("max_position_embeddings", 2048),
            tie_word_embeddings=cfg.get("tie_word_embeddings", False),
            eos_token_ids=eos_ids,
            quant_method=(cfg.get("quantization_config") or {}).get("quant_method"),
        )
