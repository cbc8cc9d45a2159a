"""Memory model edge cases: tied embeddings, one layer per stage, uneven stages, an explicit
head_dim, AFAB against 1F1B, Qwen2's q/k/v biases under TP, and refusals; oracles as in the
public tests (memory_oracle.py: the meta-device model, a meta Adam step, saved-tensor hooks)."""

from __future__ import annotations

import pytest
import torch
from conftest import load_config, needs_configs
from memory_oracle import saved_activation_bytes, zero_bytes
from parallel import TrainingPlan, activation_bytes_per_microbatch, memory_per_rank, parameters_per_rank

TIED = {"model_type": "llama", "hidden_size": 32, "num_attention_heads": 4, "num_key_value_heads": 4,
        "intermediate_size": 64, "num_hidden_layers": 4, "vocab_size": 37, "tie_word_embeddings": True}
HEAD_DIM = {"model_type": "qwen2", "hidden_size": 48, "num_attention_heads": 4, "num_key_value_heads": 2,
            "head_dim": 24, "intermediate_size": 80, "num_hidden_layers": 5, "vocab_size": 30,
            "tie_word_embeddings": False}


@pytest.mark.points(2)
def test_tied_embeddings_are_shared_on_one_stage_and_copied_with_a_pipeline():
    for tp, pp in ((1, 1), (2, 1), (1, 2), (2, 4)):
        plan = TrainingPlan(tp=tp, pp=pp)
        for stage in range(pp):
            want = zero_bytes(TIED, dp=1, tp=tp, pp=pp, stage=stage, zero=0)["parameters"]
            assert parameters_per_rank(TIED, plan, stage) == want, f"tp={tp}, pp={pp}, stage {stage}"


@pytest.mark.points(2)
def test_explicit_head_dim_and_qkv_biases():
    for tp, pp in ((1, 1), (2, 2), (2, 5)):
        plan = TrainingPlan(tp=tp, pp=pp, micro_batch_size=1, seq_len=6, act_bytes=4)
        for stage in range(pp):
            want = zero_bytes(HEAD_DIM, dp=1, tp=tp, pp=pp, stage=stage, zero=0)["parameters"]
            assert parameters_per_rank(HEAD_DIM, plan, stage) == want, f"parameters, tp={tp}, pp={pp}, stage {stage}"
            acts = saved_activation_bytes(HEAD_DIM, tp=tp, pp=pp, stage=stage, batch=1, seq=6, dtype=torch.float32)
            assert activation_bytes_per_microbatch(HEAD_DIM, plan, stage) == acts, f"activations, tp={tp}, pp={pp}, stage {stage}"


@pytest.mark.points(2)
@needs_configs("llama-3-70b", "llama-3-8b")
def test_one_layer_per_stage_and_uneven_stages():
    cfg = load_config("llama-3-8b")
    plan = TrainingPlan(tp=8, pp=32, dp=2, zero_stage=3)
    for stage in (0, 1, 17, 31):
        want = zero_bytes(cfg, dp=2, tp=8, pp=32, stage=stage, zero=3)
        got = memory_per_rank(cfg, plan, stage)
        assert (got.weights, got.gradients, got.optimizer) == (want["weights"], want["gradients"], want["optimizer"]), stage
    cfg = load_config("llama-3-70b")  # 80 layers over 3 stages: 27, 27, 26
    for stage in range(3):
        assert parameters_per_rank(cfg, TrainingPlan(tp=4, pp=3), stage) == \
            zero_bytes(cfg, dp=1, tp=4, pp=3, stage=stage, zero=0)["parameters"], stage


@pytest.mark.points(2)
def test_uneven_vocabulary_shards_and_zero_partitions_round_up():
    """A vocabulary of 37 over tp = 2 and 4 (the rank with the most rows), and ZeRO over dp = 3 and 7,
    which divide no stage's count: each rank's share is ceil(N / dp), by the meta-model oracle."""
    for cfg, splits in ((TIED, ((2, 1, 3), (4, 2, 7), (2, 2, 3))), (HEAD_DIM, ((2, 1, 7), (2, 2, 3)))):
        for tp, pp, dp in splits:
            for zero in (1, 2, 3):
                plan = TrainingPlan(dp=dp, tp=tp, pp=pp, zero_stage=zero)
                for stage in range(pp):
                    want = zero_bytes(cfg, dp=dp, tp=tp, pp=pp, stage=stage, zero=zero)
                    got = memory_per_rank(cfg, plan, stage)
                    what = f"vocab {cfg['vocab_size']}, dp={dp} tp={tp} pp={pp}, ZeRO-{zero}, stage {stage}"
                    assert parameters_per_rank(cfg, plan, stage) == want["parameters"], what
                    assert (got.weights, got.gradients, got.optimizer) == \
                        (want["weights"], want["gradients"], want["optimizer"]), what


@pytest.mark.points(2)
def test_afab_keeps_every_microbatch_and_1f1b_at_most_pp_minus_stage():
    small = dict(TIED, tie_word_embeddings=False)
    for schedule, m in (("afab", 6), ("1f1b", 6), ("1f1b", 2)):
        plan = TrainingPlan(tp=2, pp=4, num_microbatches=m, schedule=schedule, micro_batch_size=3, seq_len=5)
        for stage in range(4):
            one = saved_activation_bytes(small, tp=2, pp=4, stage=stage, batch=3, seq=5, dtype=torch.bfloat16)
            held = m if schedule == "afab" else min(4 - stage, m)
            got = memory_per_rank(small, plan, stage)
            assert got.activations == held * one, f"{schedule}, m={m}, stage {stage}"
            assert got.total == got.weights + got.gradients + got.optimizer + got.activations


@pytest.mark.points(1)
@needs_configs("qwen2.5-7b", "mixtral-8x7b")
def test_refusals():
    cfg = load_config("qwen2.5-7b")
    assert parameters_per_rank(cfg, TrainingPlan(tp=4)) > 0  # a working call first
    for plan, stage in ((TrainingPlan(tp=8), 0), (TrainingPlan(tp=3), 0), (TrainingPlan(pp=29), 0),
                        (TrainingPlan(pp=2), 2), (TrainingPlan(pp=2), -1)):
        with pytest.raises(ValueError):
            memory_per_rank(cfg, plan, stage)
    with pytest.raises(ValueError):
        memory_per_rank(load_config("mixtral-8x7b"), TrainingPlan(), 0)
    for bad in (dict(zero_stage=4), dict(dp=0), dict(schedule="gpipe"), dict(master_bytes=-1)):
        with pytest.raises(ValueError):
            TrainingPlan(**bad)
