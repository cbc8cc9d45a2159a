"""An architecture as the numbers that size it, read from a Hugging Face config.json.

Families: llama, mistral, qwen2, qwen3, gemma (dense); mixtral (top-k MoE); deepseek_v3 (MLA
attention, shared + routed experts, dense first layers, a multi-token-prediction module).
"""

from __future__ import annotations

from dataclasses import dataclass

FAMILIES = ("llama", "mistral", "qwen2", "qwen3", "gemma", "mixtral", "deepseek_v3")


@dataclass(frozen=True)
class MoE:
    """Mixture-of-experts MLP. Layers below `first_dense` are dense (intermediate size
    `Arch.intermediate_size`), the others MoE (transformers' DeepSeek-V3 reads no other key for it)."""

    num_experts: int            # routed experts per MoE layer
    top_k: int                  # routed experts one token uses
    shared_experts: int         # experts every token uses (DeepSeek), 0 for Mixtral
    expert_intermediate: int    # intermediate size of one expert (routed or shared)
    first_dense: int = 0        # DeepSeek-V3's first_k_dense_replace
    router_bias: bool = False   # DeepSeek-V3's e_score_correction_bias: one number per routed expert

    def __post_init__(self) -> None:
        if not 0 < self.top_k <= self.num_experts:
            raise ValueError(f"top_k={self.top_k} must be in 1..num_experts={self.num_experts}")
        if self.shared_experts < 0 or self.expert_intermediate <= 0 or self.first_dense < 0:
            raise ValueError(f"invalid MoE sizes: {self}")


@dataclass(frozen=True)
class MLA:
    """DeepSeek's multi-head latent attention: q through a rank-`q_lora_rank` bottleneck (None: a plain
    projection), k and v from one compressed latent of `kv_lora_rank` plus a shared rope key."""

    q_lora_rank: int | None
    kv_lora_rank: int
    qk_nope_head_dim: int
    qk_rope_head_dim: int
    v_head_dim: int

    @property
    def qk_head_dim(self) -> int:
        return self.qk_nope_head_dim + self.qk_rope_head_dim


@dataclass(frozen=True)
class Arch:
    """What sizes a decoder-only model. `head_dim` is the q/k/v head size of standard attention
    (with MLA: see `mla`)."""

    model_type: str
    vocab_size: int
    hidden_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    intermediate_size: int      # the dense MLP's
    tie_embeddings: bool        # the LM head reuses the embedding matrix
    qkv_bias: bool              # biases on the q, k and v projections
    o_bias: bool                # a bias on the output projection
    qk_norm: bool               # an RMSNorm over each q and k head (Qwen3), weight of size head_dim
    activation: str             # the config's activation name ("silu", "gelu", ...); MLPs are gated
    rope_theta: float
    rope_scaling: str | None    # the rope_scaling type ("yarn", "llama3", ...) or None
    moe: MoE | None = None
    mla: MLA | None = None
    mtp_layers: int = 0         # DeepSeek-V3's num_nextn_predict_layers
    mlp_bias: bool = False      # biases on the dense MLP's gate, up and down projections (LLaMA's mlp_bias)

    def __post_init__(self) -> None:
        if self.model_type not in FAMILIES:
            raise ValueError(f"unknown model_type {self.model_type!r}; supported: {', '.join(FAMILIES)}")
        sizes = (self.vocab_size, self.hidden_size, self.num_layers, self.num_heads, self.num_kv_heads,
                 self.head_dim, self.intermediate_size)
        if min(sizes) <= 0:
            raise ValueError(f"sizes must be positive: {self}")
        if self.num_heads % self.num_kv_heads:
            raise ValueError(f"num_heads={self.num_heads} is not a multiple of num_kv_heads={self.num_kv_heads}")


def from_config(config: dict) -> Arch:
    """The `Arch` a parsed config.json describes.

    Required (ValueError naming the key when it is absent or null): `model_type` (one of FAMILIES),
    `vocab_size`, `hidden_size`, `num_hidden_layers`, `num_attention_heads`, `intermediate_size`;
    for mixtral also `num_local_experts`, `num_experts_per_tok`; for deepseek_v3 also
    `n_routed_experts`, `num_experts_per_tok`, `n_shared_experts`, `moe_intermediate_size`,
    `kv_lora_rank`, `qk_nope_head_dim`, `qk_rope_head_dim`, `v_head_dim`.

    Every other key may be left out and takes the course's default, the same for every family
    (where transformers' config classes differ, e.g. GemmaConfig's head_dim=256, the course's
    rule wins): `num_key_value_heads` -> num_attention_heads; `head_dim` -> hidden_size //
    num_attention_heads; `tie_word_embeddings` -> True for gemma, False for the others;
    `attention_bias` -> False; `hidden_act` -> "silu" (gemma reads `hidden_activation` first);
    `rope_theta` -> 10000.0; no rope scaling; deepseek_v3's `q_lora_rank` -> None (a plain q
    projection), `first_k_dense_replace` -> 0, `num_nextn_predict_layers` -> 0.

    Biases, as transformers builds each family: qwen2 always has q/k/v biases and no o bias,
    whatever `attention_bias` says; mistral and mixtral never have attention biases; every other
    family (deepseek_v3's MLA included) sets qkv_bias = o_bias = `attention_bias`. Only llama reads
    `mlp_bias` (default False; the other families' MLPs and all experts have no biases). Qwen3 has
    qk_norm. Mixtral's experts are `num_local_experts` of `intermediate_size`; DeepSeek-V3's are
    `n_routed_experts` + `n_shared_experts` of `moe_intermediate_size`, with MLA and
    `num_nextn_predict_layers` (other families: mtp_layers 0 even with the key). RoPE settings come in either layout transformers
    reads: `rope_scaling` (the legacy key: the type under `rope_type` or `type`, `rope_theta`
    beside it at the top level) or `rope_parameters` (the current key: type and `rope_theta`
    inside; type `"default"` is unscaled).
    Raises ValueError naming an unknown `model_type` or a missing required key.
    """
    # BEGIN SOLUTION
    kind = config.get("model_type")
    if kind not in FAMILIES:
        raise ValueError(f"unknown model_type {kind!r}; supported: {', '.join(FAMILIES)}")

    def need(key: str) -> int:
        if key not in config or config[key] is None:
            raise ValueError(f"{kind} config.json lacks {key!r}")
        return config[key]

    hidden, heads = need("hidden_size"), need("num_attention_heads")
    bias = bool(config.get("attention_bias", False)) and kind not in ("mistral", "mixtral")
    # transformers 4 names RoPE scaling rope_scaling, 5 rope_parameters (type "default": unscaled)
    scaling = config.get("rope_scaling") or config.get("rope_parameters") or None
    rope_type = (scaling.get("rope_type") or scaling.get("type")) if scaling else None
    moe = mla = None
    if kind == "mixtral":
        moe = MoE(need("num_local_experts"), need("num_experts_per_tok"), 0, need("intermediate_size"))
    if kind == "deepseek_v3":
        moe = MoE(need("n_routed_experts"), need("num_experts_per_tok"), need("n_shared_experts"),
                  need("moe_intermediate_size"), config.get("first_k_dense_replace", 0), router_bias=True)
        mla = MLA(config.get("q_lora_rank"), need("kv_lora_rank"), need("qk_nope_head_dim"),
                  need("qk_rope_head_dim"), need("v_head_dim"))
    activation = (config.get("hidden_activation") if kind == "gemma" else None) or config.get("hidden_act", "silu")
    theta = config.get("rope_theta") or (config.get("rope_parameters") or {}).get("rope_theta", 10000.0)
    return Arch(
        model_type=kind, vocab_size=need("vocab_size"), hidden_size=hidden, num_layers=need("num_hidden_layers"),
        num_heads=heads, num_kv_heads=config.get("num_key_value_heads") or heads,
        head_dim=config.get("head_dim") or hidden // heads, intermediate_size=need("intermediate_size"),
        tie_embeddings=bool(config.get("tie_word_embeddings", kind == "gemma")),
        qkv_bias=True if kind == "qwen2" else bias, o_bias=False if kind == "qwen2" else bias,
        qk_norm=kind == "qwen3", activation=activation, rope_theta=float(theta),
        rope_scaling=None if rope_type in (None, "default") else rope_type,
        moe=moe, mla=mla, mtp_layers=config.get("num_nextn_predict_layers", 0) if kind == "deepseek_v3" else 0,
        mlp_bias=kind == "llama" and bool(config.get("mlp_bias", False)))
    # END SOLUTION



def is_moe_layer(arch: Arch, index: int) -> bool:
    """Whether layer `index` (0-based; indices past num_layers are MTP layers) has routed experts."""
    moe = arch.moe
    return moe is not None and index >= moe.first_dense
