"""The deployment plan against the judge's own computation, written another way: the tensors of
each stage listed by name with their shapes on one GPU, summed; the collectives of a step listed
one by one with their ring cost. Cases: Llama-3-70B on 2 x 8 H100 (the seed's deployment), the same
with TP=16 over one stage (KV heads replicated past their 8), and Llama-3-8B on one node."""

from __future__ import annotations

import pytest
from conftest import load_config, needs_configs
from tpp import Hardware, plan_deployment

HW = dict(hbm_bytes_per_s=3.35e12, nvlink_bytes_per_s=450e9, nvlink_alpha_s=5e-6, network_bytes_per_s=50e9,
          network_alpha_s=10e-6, gpu_memory_bytes=80e9)


def judge_plan(cfg: dict, tp: int, pp: int, batch: int, context: int, b: int = 2) -> dict:
    h, inter, vocab, heads = cfg["hidden_size"], cfg["intermediate_size"], cfg["vocab_size"], cfg["num_attention_heads"]
    kv = cfg.get("num_key_value_heads") or heads
    d = cfg.get("head_dim") or h // heads
    kv_gpu = kv // tp if tp <= kv else 1
    n_layers = cfg["num_hidden_layers"]
    splits = [n_layers // pp + (1 if s < n_layers % pp else 0) for s in range(pp)]
    out = dict(layers=[], weights=[], kv=[], nvlink=[], time=0.0)
    act, logits = batch * h * b, batch * vocab * b
    for s, n in enumerate(splits):
        first, last = s == 0, s == pp - 1
        tensors = {"q": h * heads * d / tp, "k": h * kv_gpu * d, "v": h * kv_gpu * d, "o": heads * d * h / tp,
                   "gate": h * inter / tp, "up": h * inter / tp, "down": inter * h / tp, "norms": 2 * h}
        params = n * sum(tensors.values())
        embed = vocab * h / tp if first else 0
        params += embed
        if last:
            params += h + (0 if (first and cfg.get("tie_word_embeddings")) else vocab * h / tp)
        kv_bytes = 2 * n * kv_gpu * d * batch * context * b
        collectives = [("ar", act)] * (2 * n + first) + ([("ag", logits)] if last else [])
        sent, comm = 0.0, 0.0
        for kind, m in collectives if tp > 1 else []:
            steps = 2 * (tp - 1) if kind == "ar" else tp - 1
            sent += steps * m / tp
            comm += steps * HW["nvlink_alpha_s"] + steps * m / tp / HW["nvlink_bytes_per_s"]
        out["layers"].append(n)
        out["weights"].append(params * b)
        out["kv"].append(kv_bytes)
        out["nvlink"].append(sent)
        out["time"] += (params * b - embed * b + kv_bytes) / HW["hbm_bytes_per_s"] + comm
    out["network"] = (pp - 1) * tp * act
    out["time"] += (pp - 1) * (HW["network_alpha_s"] + act / HW["network_bytes_per_s"])
    out["fits"] = all(w + k <= HW["gpu_memory_bytes"] for w, k in zip(out["weights"], out["kv"]))
    return out


CASES = [("llama-3-70b", 8, 2, 64, 4096), ("llama-3-70b", 16, 1, 32, 8192), ("llama-3-8b", 4, 1, 128, 2048),
         ("llama-3-70b", 8, 2, 1, 128)]


@needs_configs("llama-3-70b", "llama-3-8b")
@pytest.mark.points(6)
@pytest.mark.parametrize("name,tp,pp,batch,context", CASES)
def test_plan_matches_the_judges_computation(name, tp, pp, batch, context, tol):
    cfg = load_config(name)
    plan = plan_deployment(cfg, tp=tp, pp=pp, batch=batch, context=context, hw=Hardware(**HW))
    want = judge_plan(cfg, tp, pp, batch, context)
    case = f"{name}, TP={tp}, PP={pp}, batch {batch}, context {context}"
    assert list(plan.layers) == want["layers"], f"{case}: layers per stage {plan.layers}, expected {want['layers']}"
    for field, key in (("weight_bytes", "weights"), ("kv_bytes", "kv"), ("nvlink_bytes", "nvlink")):
        got = list(getattr(plan, field))
        assert got == pytest.approx(want[key], rel=tol("plan")["rtol"]), f"{case}: {field} {got}, expected {want[key]}"
    assert plan.network_bytes == want["network"], f"{case}: network_bytes {plan.network_bytes}, expected {want['network']}"
    assert plan.step_time_s == pytest.approx(want["time"], rel=tol("plan")["rtol"]), (
        f"{case}: step_time_s {plan.step_time_s:.6g}, expected {want['time']:.6g}")
    assert plan.fits == want["fits"], f"{case}: fits {plan.fits}, expected {want['fits']}"


@pytest.mark.points(1)
@needs_configs("llama-3-70b")
def test_plan_refuses_a_zero_batch():
    assert plan_deployment(load_config("llama-3-70b"), tp=8, pp=2, batch=1, context=1).layers == (40, 40)
    with pytest.raises(ValueError):
        plan_deployment({"hidden_size": 8}, tp=1, pp=1, batch=0, context=1)
