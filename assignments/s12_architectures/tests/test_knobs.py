"""The six knobs, checked against the configs' own keys."""

from conftest import real
from modelmath import HEADER, from_config, knobs_table, six_knobs


def test_knobs_of_llama_and_deepseek():
    k = six_knobs(from_config(real("llama-3-8b")))  # 8 of 32 kv heads, silu, rope_theta 500000
    assert (k.attention, k.kv_heads, k.norm, k.activation, k.positional, k.moe) == \
        ("GQA", 8, "RMSNorm", "SwiGLU", "RoPE θ=500000", "dense")
    d = six_knobs(from_config(real("deepseek-v3")))  # rope_scaling type yarn; 256 routed, 1 shared, top 8
    assert (d.attention, d.kv_heads, d.positional, d.moe) == ("MLA", 1, "RoPE θ=10000, yarn",
                                                             "256 routed + 1 shared, top-8")


def test_table_has_a_header_a_separator_and_a_row_per_model_in_order():
    names = ["gemma-7b", "mixtral-8x7b"]
    lines = knobs_table({n: from_config(real(n)) for n in names}).splitlines()
    assert lines[0] == "| " + " | ".join(HEADER) + " |"
    assert lines[1] == "| " + " | ".join(["---"] * 7) + " |"
    assert lines[2] == "| gemma-7b | MHA | 16 | RMSNorm | GeGLU | RoPE θ=10000 | dense |"
    assert lines[3] == "| mixtral-8x7b | GQA | 8 | RMSNorm | SwiGLU | RoPE θ=1000000 | 8 experts, top-2 |"
    assert len(lines) == 4
