"""Shared by tests/ and hidden/: the real configs, small configs of the same families, and the
oracles, all from transformers run in the test's own process (never the package):

- parameters: the transformers model built from the config on the meta device (shapes only),
  its parameters counted (tied ones once) plus DeepSeek's router score-correction bias, which
  transformers keeps as a buffer and the checkpoint stores;
- KV bytes: the tensors transformers' DynamicCache holds after a real forward of a small model;
- FLOPs: torch's FlopCounterMode around a real forward of a small model with eager attention.
"""

from __future__ import annotations

import warnings

import coursedata
import torch
from torch.utils.flop_counter import FlopCounterMode

REAL = ("deepseek-v3", "gemma-7b", "llama-3-70b", "llama-3-8b", "mixtral-8x7b", "qwen2.5-7b", "qwen3-8b")

# Small models of each family: the real config with its sizes shrunk (every structural key kept).
SMALL = {
    "llama-3-8b": dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                       intermediate_size=96, vocab_size=128),
    "qwen2.5-7b": dict(hidden_size=56, num_hidden_layers=2, num_attention_heads=7, num_key_value_heads=1,
                       intermediate_size=80, vocab_size=100),
    "qwen3-8b": dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                     head_dim=24, intermediate_size=96, vocab_size=128),
    "gemma-7b": dict(hidden_size=48, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=4,
                     head_dim=16, intermediate_size=80, vocab_size=128),
    "mixtral-8x7b": dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                         intermediate_size=48, num_local_experts=4, vocab_size=128),
    "deepseek-v3": dict(hidden_size=64, num_hidden_layers=3, first_k_dense_replace=1, n_routed_experts=8,
                        n_group=2, topk_group=1, num_experts_per_tok=2, moe_intermediate_size=16,
                        intermediate_size=96, num_attention_heads=4, num_key_value_heads=4, q_lora_rank=24,
                        kv_lora_rank=16, qk_nope_head_dim=8, qk_rope_head_dim=4, v_head_dim=8, vocab_size=128,
                        rope_scaling=None),
}


def assert_same_count(what: str, yours: int, expected: int) -> None:
    """Exact equality of a count, with a failure message naming the case and the difference."""
    assert yours == expected, (f"{what}: yours {yours:,}, expected {expected:,} "
                               f"(yours is {yours - expected:+,} off)")


def real(name: str) -> dict:
    return coursedata.model_config(name)


def small(name: str, **more) -> dict:
    """The real config of `name` with SMALL's sizes (and `more`) put in."""
    return real(name) | SMALL[name] | more


def _hf_config(config: dict):
    from transformers import AutoConfig

    fields = {k: v for k, v in config.items() if k not in ("auto_map", "quantization_config", "architectures")}
    hf = AutoConfig.for_model(**fields)
    hf._attn_implementation = "eager"
    hf._experts_implementation = "eager"  # a loop of plain matmuls, which FlopCounterMode counts (not grouped_mm)
    return hf


def hf_model(config: dict, device: str = "cpu"):
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    with torch.device(device), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return AutoModelForCausalLM.from_config(_hf_config(config), attn_implementation="eager", experts_implementation="eager").eval()


def hf_param_count(config: dict) -> int:
    """Parameters of the transformers model (tied ones once), plus the score-correction bias buffers."""
    model = hf_model(config, "meta")
    count = sum(p.numel() for p in model.parameters())
    return count + sum(b.numel() for n, b in model.named_buffers() if n.endswith("e_score_correction_bias"))


def _matmul_flops(counter: FlopCounterMode) -> int:
    """The counted FLOPs less the rotary embedding's: some transformers versions build the RoPE angles
    with a tiny matmul (inv_freq x positions), which the handout's count leaves out."""
    rotary = sum(sum(ops.values()) for name, ops in counter.get_flop_counts().items() if name.endswith("rotary_emb"))
    return counter.get_total_flops() - rotary


def _ids(n: int, vocab: int) -> torch.Tensor:
    return torch.randint(0, vocab, (1, n), generator=torch.Generator().manual_seed(n))


def hf_cache_numbers_per_token(config: dict, tokens: int = 6) -> int:
    """Numbers transformers' cache holds per token, all layers, after a forward over `tokens` tokens."""
    model = hf_model(config)
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cache = model(_ids(tokens, config["vocab_size"]), use_cache=True).past_key_values
    total = sum(layer.keys.numel() + layer.values.numel() for layer in cache.layers)
    assert total % tokens == 0
    return total // tokens


def hf_decode_flops(config: dict, context: int, model=None) -> int:
    """FlopCounterMode's count of one decode step at `context` keys (context - 1 cached)."""
    model = model or hf_model(config)
    ids = _ids(context, config["vocab_size"])
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cache = model(ids[:, :-1], use_cache=True).past_key_values if context > 1 else None
        with FlopCounterMode(display=False) as counter:
            model(ids[:, -1:], past_key_values=cache, use_cache=True)
    return _matmul_flops(counter)


def hf_prefill_flops(config: dict, tokens: int) -> int:
    """Prefill FLOPs over causal pairs. Eager attention computes all tokens^2 pairs, so its count is
    head + lin*T + att*T^2 in T: three forwards (T = 1, 2, 3) give head, lin and att exactly, and
    the causal count is head + lin*T + att*T(T+1)/2."""
    model = hf_model(config)
    counts = []
    for t in (1, 2, 3):
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with FlopCounterMode(display=False) as counter:
                model(_ids(t, config["vocab_size"]), use_cache=False, logits_to_keep=1)
        counts.append(_matmul_flops(counter))
    f1, f2, f3 = counts
    att2 = f3 - 2 * f2 + f1          # second difference of a + b T + c T^2 is 2c
    assert att2 % 2 == 0
    att = att2 // 2
    lin = f2 - f1 - 3 * att
    head = f1 - lin - att
    return head + lin * tokens + att * tokens * (tokens + 1) // 2
