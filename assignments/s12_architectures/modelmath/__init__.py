"""Stage 12: what a config.json says about a model's size, memory and compute."""

from modelmath.arch import FAMILIES, MLA, Arch, MoE, from_config, is_moe_layer
from modelmath.counts import (attention_params, gated_mlp_params, layer_params, mlp_params, mtp_params,
                              param_count, unique_param_count)
from modelmath.flops import (attention_flops_per_pair, decode_flops, latent_up_flops_per_key,
                             linear_flops_per_token, prefill_flops)
from modelmath.knobs import HEADER, Knobs, knobs_table, six_knobs
from modelmath.memory import kv_bytes_per_token, max_cached_tokens

__all__ = ["FAMILIES", "MLA", "Arch", "MoE", "from_config", "is_moe_layer", "attention_flops_per_pair",
           "decode_flops", "latent_up_flops_per_key", "linear_flops_per_token", "prefill_flops", "HEADER",
           "Knobs", "knobs_table", "six_knobs", "kv_bytes_per_token", "max_cached_tokens", "attention_params",
           "gated_mlp_params", "layer_params", "mlp_params", "mtp_params", "param_count", "unique_param_count"]
