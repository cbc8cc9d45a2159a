"""The memory model per GPU against independent counts (memory_oracle.py, judge side): the Hugging
Face model of a published config built on the meta device for the weights, meta tensors of the
ZeRO partition and a real Adam step on meta fp32 masters for gradients and optimizer states, and
saved-tensor hooks on a small LLaMA for the activations. Plus one configuration worked by hand.
"""

from __future__ import annotations

import math

import pytest
import torch
from conftest import load_config, needs_configs
from memory_oracle import saved_activation_bytes, zero_bytes
from parallel import (
    TrainingPlan,
    activation_bytes_per_microbatch,
    memory_per_rank,
    microbatches_in_flight,
    parameters_per_rank,
)

SMALL = {"model_type": "llama", "hidden_size": 64, "num_attention_heads": 4, "num_key_value_heads": 2,
         "intermediate_size": 96, "num_hidden_layers": 3, "vocab_size": 51, "tie_word_embeddings": False}


@pytest.mark.points(2)
@needs_configs("llama-3-8b")
def test_llama3_8b_on_eight_gpus_with_zero1_by_hand():
    cfg = load_config("llama-3-8b")
    n = 8_030_261_248  # published parameter count of the checkpoint
    plan = TrainingPlan(dp=8, zero_stage=1, seq_len=4096)
    assert parameters_per_rank(cfg, plan) == n
    mem = memory_per_rank(cfg, plan)
    assert (mem.weights, mem.gradients) == (2 * n, 2 * n)  # bf16 weights and gradients, whole on every GPU
    assert mem.optimizer == 12 * math.ceil(n / 8)  # fp32 master + two fp32 moments, one eighth each
    # activations of one 4096-token sequence: 32 layers x (2 x (4 x 4096 + 2 x (32 + 8) x 128 + 4 x 14336)
    # + 4 x (2 + 32)) bytes per token, plus the output layer's 2 x 2 x 4096 + 4 x (1 + 128256)
    per_token = 32 * (2 * (4 * 4096 + 2 * 40 * 128 + 4 * 14336) + 4 * 34) + 2 * 2 * 4096 + 4 * (1 + 128256)
    assert mem.activations == 4096 * per_token


@pytest.mark.points(1)
@needs_configs("llama-3-8b", "qwen2.5-7b", "llama-3-70b")
@pytest.mark.parametrize("name", ["llama-3-8b", "qwen2.5-7b", "llama-3-70b"])
@pytest.mark.parametrize("tp,pp", [(1, 1), (2, 3), (8, 4)], ids=["tp1-pp1", "tp2-pp3", "tp8-pp4"])
def test_parameters_per_rank_equal_the_meta_model_cut_by_name(name, tp, pp):
    cfg = load_config(name)
    if cfg["num_key_value_heads"] % tp:
        tp = cfg["num_key_value_heads"]  # Qwen2.5-7B has 4 KV heads
    plan = TrainingPlan(tp=tp, pp=pp)
    for stage in range(pp):
        want = zero_bytes(cfg, dp=1, tp=tp, pp=pp, stage=stage, zero=0)["parameters"]
        assert parameters_per_rank(cfg, plan, stage) == want, f"{name}, tp={tp}, pp={pp}, stage {stage}"


@pytest.mark.points(1)
@needs_configs("llama-3-8b", "qwen2.5-7b")
@pytest.mark.parametrize("zero", [0, 1, 2, 3])
def test_weights_gradients_and_adam_states_per_zero_stage(zero):
    for name, dp, tp, pp in [("llama-3-8b", 8, 1, 1), ("llama-3-8b", 4, 2, 2), ("qwen2.5-7b", 3, 4, 3)]:
        cfg = load_config(name)
        plan = TrainingPlan(dp=dp, tp=tp, pp=pp, zero_stage=zero)
        for stage in range(pp):
            want = zero_bytes(cfg, dp=dp, tp=tp, pp=pp, stage=stage, zero=zero)
            got = memory_per_rank(cfg, plan, stage)
            what = f"{name}, dp={dp} tp={tp} pp={pp}, ZeRO-{zero}, stage {stage}"
            assert got.weights == want["weights"], f"{what}: weights"
            assert got.gradients == want["gradients"], f"{what}: gradients"
            assert got.optimizer == want["optimizer"], f"{what}: optimizer states"


@pytest.mark.points(1)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
@pytest.mark.parametrize("tp,pp", [(1, 1), (2, 1), (1, 2), (2, 3)], ids=["tp1-pp1", "tp2-pp1", "tp1-pp2", "tp2-pp3"])
def test_activation_bytes_equal_what_autograd_saves(tp, pp, dtype):
    for stage in range(pp):
        want = saved_activation_bytes(SMALL, tp=tp, pp=pp, stage=stage, batch=2, seq=8, dtype=dtype)
        plan = TrainingPlan(tp=tp, pp=pp, micro_batch_size=2, seq_len=8, act_bytes=dtype.itemsize)
        assert activation_bytes_per_microbatch(SMALL, plan, stage) == want, f"tp={tp}, pp={pp}, stage {stage}"


@pytest.mark.points(2)
def test_a_stage_holds_the_activations_of_the_microbatches_in_flight():
    for p in range(1, 6):
        for m in range(1, 9):
            for stage in range(p):
                plan = TrainingPlan(pp=p, num_microbatches=m, schedule="1f1b")
                assert microbatches_in_flight(plan, stage) == min(p - stage, m), f"1F1B p={p} m={m} stage {stage}"
                afab = TrainingPlan(pp=p, num_microbatches=m, schedule="afab")
                assert microbatches_in_flight(afab, stage) == m, f"AFAB p={p} m={m} stage {stage}"
    plan = TrainingPlan(tp=2, pp=3, num_microbatches=8, micro_batch_size=2, seq_len=8, act_bytes=2)
    for stage in range(3):
        one = saved_activation_bytes(SMALL, tp=2, pp=3, stage=stage, batch=2, seq=8, dtype=torch.bfloat16)
        assert memory_per_rank(SMALL, plan, stage).activations == (3 - stage) * one
