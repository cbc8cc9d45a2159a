"""Every knob spelled as the handout says, across families and variants."""

import pytest
from conftest import REAL, real, small
from modelmath import HEADER, from_config, knobs_table, six_knobs


def _expected(cfg: dict) -> tuple:
    """The knobs read straight off a config (the handout's spelling)."""
    kind = cfg["model_type"]
    heads = cfg["num_attention_heads"]
    kv = cfg.get("num_key_value_heads") or heads
    attention = "MLA" if kind == "deepseek_v3" else "MHA" if kv == heads else "MQA" if kv == 1 else "GQA"
    act = (cfg.get("hidden_activation") if kind == "gemma" else None) or cfg["hidden_act"]
    scaling = cfg.get("rope_scaling")
    positional = f"RoPE θ={int(cfg['rope_theta'])}" + (f", {scaling['type']}" if scaling else "")
    if kind == "mixtral":
        moe = f"{cfg['num_local_experts']} experts, top-{cfg['num_experts_per_tok']}"
    elif kind == "deepseek_v3":
        moe = f"{cfg['n_routed_experts']} routed + {cfg['n_shared_experts']} shared, top-{cfg['num_experts_per_tok']}"
    else:
        moe = "dense"
    return (attention, 1 if kind == "deepseek_v3" else kv, "RMSNorm + QK-norm" if kind == "qwen3" else "RMSNorm",
            "SwiGLU" if act == "silu" else "GeGLU", positional, moe)


@pytest.mark.parametrize("name", REAL)
def test_knobs_of_every_real_config(name):
    k = six_knobs(from_config(real(name)))
    assert (k.attention, k.kv_heads, k.norm, k.activation, k.positional, k.moe) == _expected(real(name))


def test_one_kv_head_is_mqa_and_a_gelu_tanh_gate_is_geglu():
    assert six_knobs(from_config(small("qwen2.5-7b"))).attention == "MQA"  # the small qwen has 1 kv head
    k = six_knobs(from_config(small("llama-3-8b", hidden_act="gelu_pytorch_tanh", num_key_value_heads=4)))
    assert (k.activation, k.attention) == ("GeGLU", "MHA")


def test_deepseek_without_shared_experts_reads_as_plain_experts():
    assert six_knobs(from_config(small("deepseek-v3", n_shared_experts=0))).moe == "8 experts, top-2"


def test_an_unknown_activation_is_refused_by_name():
    assert six_knobs(from_config(small("llama-3-8b", hidden_act="silu"))) is not None  # a known one is accepted
    with pytest.raises(ValueError, match="relu"):
        six_knobs(from_config(small("llama-3-8b", hidden_act="relu")))
    # quick_gelu is CLIP's x * sigmoid(1.702 x): "gelu" is in its name but it does not start with it
    with pytest.raises(ValueError, match="quick_gelu"):
        six_knobs(from_config(small("llama-3-8b", hidden_act="quick_gelu")))


def test_the_full_table_of_the_real_configs():
    table = knobs_table({n: from_config(real(n)) for n in REAL})
    rows = [line.split(" | ") for line in table.splitlines()]
    assert table.endswith("\n") and len(rows) == 2 + len(REAL)
    assert table.splitlines()[0] == "| " + " | ".join(HEADER) + " |"
    for name, row in zip(REAL, rows[2:]):
        assert [row[0].removeprefix("| "), *row[1:-1], row[-1].removesuffix(" |")] == \
            [name, *map(str, _expected(real(name)))]
