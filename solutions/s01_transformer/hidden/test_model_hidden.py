"""Hidden: the model against HF across shapes, positions, padding, chunking, extreme weights and
the RoPE layouts of config.json.

Logit tolerance: atol = rtol = 1e-4 (fp32 CPU, logits O(1)) unless stated at the call site.
"""

from __future__ import annotations

import dataclasses
import json
import warnings
from pathlib import Path

import pytest
import torch
from transformer import SamplingParams, generate, load_model, process_logits, sample

import coursedata
from autograder.testing import course_model_dir, in_worker

try:
    from autograder.testing import oracle
except ImportError:
    from contextlib import nullcontext as oracle

ATOL = RTOL = 1e-4


def random_ids(batch: int, length: int, vocab: int = 128, seed: int = 0) -> torch.Tensor:
    return torch.randint(0, vocab, (batch, length), generator=torch.Generator().manual_seed(seed))


def check_prefill_and_decode(model, hf, hf_logits, ids: torch.Tensor, prompt_len: int) -> None:
    """Prefill `prompt_len` tokens, then decode the rest of `ids` one token at a time."""
    cache = model.new_cache(ids.shape[0], ids.shape[1])
    with torch.no_grad():
        prefill = model(ids[:, :prompt_len], cache=cache)
        torch.testing.assert_close(prefill, hf_logits(hf, ids[:, :prompt_len]), atol=ATOL, rtol=RTOL)
        for t in range(prompt_len, ids.shape[1]):
            step = model(ids[:, t : t + 1], cache=cache)
            expected = hf_logits(hf, ids[:, : t + 1])[:, -1:]
            torch.testing.assert_close(step, expected, atol=ATOL, rtol=RTOL, msg=f"decode at position {t}")


@pytest.mark.points(1)
@pytest.mark.parametrize("kv_heads", [8, 4, 2, 1], ids=["ratio1", "ratio2", "ratio4", "ratio8"])
def test_gqa_ratios_match_hf(kv_heads, make_hf_llama, hf_logits):
    hf, folder = make_hf_llama(seed=10 + kv_heads, num_attention_heads=8, num_key_value_heads=kv_heads)
    check_prefill_and_decode(load_model(folder), hf, hf_logits, random_ids(2, 10, seed=kv_heads), prompt_len=6)


@pytest.mark.points(1)
@pytest.mark.parametrize("prompt_len", [1, 5, 17])
def test_odd_prompt_lengths_match_hf(prompt_len, make_hf_llama, hf_logits):
    hf, folder = make_hf_llama(seed=20)
    ids = random_ids(1, prompt_len + 3, seed=prompt_len)
    check_prefill_and_decode(load_model(folder), hf, hf_logits, ids, prompt_len)


@pytest.mark.points(1)
@pytest.mark.parametrize("theta", [100.0, 10000.0, 1_000_000.0])
def test_rope_theta_variants_match_hf(theta, make_hf_llama, hf_logits):
    hf, folder = make_hf_llama(seed=30, rope_theta=theta)
    check_prefill_and_decode(load_model(folder), hf, hf_logits, random_ids(1, 40, seed=31), prompt_len=37)


@pytest.mark.points(1)
def test_head_dim_independent_of_hidden_size_matches_hf(make_hf_llama, hf_logits):
    # 4 heads of 32 dims on a 48-wide residual stream: q_proj is 48 -> 128, o_proj 128 -> 48.
    hf, folder = make_hf_llama(seed=40, hidden_size=48, num_attention_heads=4, num_key_value_heads=2, head_dim=32)
    check_prefill_and_decode(load_model(folder), hf, hf_logits, random_ids(2, 9, seed=40), prompt_len=5)


@pytest.mark.points(1)
def test_tied_embeddings_checkpoint_matches_hf(make_hf_llama, hf_logits):
    hf, folder = make_hf_llama(seed=50, tie_word_embeddings=True)
    check_prefill_and_decode(load_model(folder), hf, hf_logits, random_ids(1, 8, seed=50), prompt_len=5)


@pytest.mark.points(2)
def test_chunked_prefill_into_a_filled_cache_matches_hf(make_hf_llama, hf_logits):
    hf, folder = make_hf_llama(seed=60)
    model = load_model(folder)
    ids = random_ids(2, 12, seed=60)
    expected = hf_logits(hf, ids)
    cache = model.new_cache(2, 12)
    with torch.no_grad():
        chunks = [model(ids[:, a:b], cache=cache) for a, b in [(0, 5), (5, 9), (9, 10), (10, 12)]]
    torch.testing.assert_close(torch.cat(chunks, dim=1), expected, atol=ATOL, rtol=RTOL)


@pytest.mark.points(2)
def test_left_padded_batch_matches_each_prompt_alone(make_hf_llama, hf_logits, hf_greedy):
    hf, folder = make_hf_llama(seed=70)
    model = load_model(folder)
    prompts = [random_ids(1, n, seed=70 + n)[0] for n in (3, 9, 6)]
    width = max(len(p) for p in prompts)
    padded = torch.zeros(3, width, dtype=torch.long)  # pad id 0 on the left
    mask = torch.zeros(3, width, dtype=torch.long)
    for b, p in enumerate(prompts):
        padded[b, width - len(p) :], mask[b, width - len(p) :] = p, 1
    with torch.no_grad():
        logits = model(padded, attention_mask=mask)
    for b, p in enumerate(prompts):
        alone = hf_logits(hf, p[None])[0]
        torch.testing.assert_close(logits[b, width - len(p) :], alone, atol=ATOL, rtol=RTOL, msg=f"prompt {b}")
    for use_cache in (True, False):
        out = generate(model, padded, attention_mask=mask, max_new_tokens=8, use_cache=use_cache)
        for b, p in enumerate(prompts):
            expected_new = hf_greedy(hf, p[None], 8)[0, len(p) :]
            assert out[b, width:].tolist() == expected_new.tolist(), f"prompt {b}, use_cache={use_cache}"


@pytest.mark.points(1)
def test_explicit_position_ids_are_used(make_hf_llama, hf_logits):
    hf, folder = make_hf_llama(seed=75)
    model = load_model(folder)
    ids = random_ids(1, 6, seed=75)
    positions = torch.arange(20, 26)[None]
    with torch.no_grad():
        ours = model(ids, position_ids=positions)
        with oracle():
            theirs = hf(input_ids=ids, position_ids=positions, use_cache=False).logits
    torch.testing.assert_close(ours, theirs, atol=ATOL, rtol=RTOL)


@pytest.mark.points(1)
def test_generate_stops_at_eos_and_pads_like_hf(make_hf_llama, hf_greedy):
    hf, folder = make_hf_llama(seed=80)
    model = load_model(folder)
    ids = random_ids(2, 5, seed=80)
    free = hf_greedy(hf, ids, 12)[0, 5:].tolist()
    eos = next(tok for i, tok in enumerate(free) if i >= 2 and tok not in free[:i])  # row 0 ends at step i
    for batch in (ids, ids[:1]):
        out = generate(model, batch, max_new_tokens=12, eos_token_id=eos, pad_token_id=3)
        expected = hf_greedy(hf, batch, 12, eos_token_id=eos, pad_token_id=3)
        assert out.tolist() == expected.tolist()


@pytest.mark.points(2)
def test_generate_stops_a_row_at_eos_id_zero(make_hf_llama, hf_greedy):
    # The course model's EOS is token 0: an id like any other, not "no EOS".
    hf, folder = make_hf_llama(seed=85)
    ids = random_ids(2, 5, seed=85)
    free = hf_greedy(hf, ids, 12)[:, 5:].tolist()
    step = next(i for i, tok in enumerate(free[0]) if i >= 2 and tok not in free[0][:i])
    # Relabel the vocabulary so that row 0's token at `step` becomes id 0: swap the embedding and
    # output rows of ids 0 and t, and the prompt ids with them (the model is otherwise unchanged).
    t = free[0][step]
    perm = torch.arange(128)
    perm[0], perm[t] = t, 0
    with torch.no_grad(), oracle():
        hf.model.embed_tokens.weight.copy_(hf.model.embed_tokens.weight[perm])
        if hf.lm_head.weight.data_ptr() != hf.model.embed_tokens.weight.data_ptr():  # untied (TINY)
            hf.lm_head.weight.copy_(hf.lm_head.weight[perm])
        hf.save_pretrained(folder)
    model, ids = load_model(folder), perm[ids]
    # Exact: row 0 is the relabelled free run up to its EOS at `step`, then padding (the EOS id 0).
    row0 = perm[torch.tensor(free[0][: step + 1])].tolist() + [0] * (11 - step)
    for batch in (ids, ids[:1]):
        out = generate(model, batch, max_new_tokens=12, eos_token_id=0)  # pad defaults to the EOS id
        expected = hf_greedy(hf, batch, 12, eos_token_id=0, pad_token_id=0)
        assert out.tolist() == expected.tolist(), f"batch of {len(batch)}"
        assert out[0, 5:].tolist() == row0[: out.shape[1] - 5], f"batch of {len(batch)}"
    assert out.shape == (1, 5 + step + 1), "a batch whose every row has finished stops early"


@pytest.mark.points(2)
def test_huge_logits_stay_exact_and_sampleable(make_hf_llama, hf_logits):
    hf, folder = make_hf_llama(seed=90)
    with torch.no_grad(), oracle():
        hf.lm_head.weight.mul_(1e4)  # logits of order 1e4
        hf.save_pretrained(folder)
    model = load_model(folder)
    ids = random_ids(2, 7, seed=90)
    with torch.no_grad():
        logits = model(ids)
    expected = hf_logits(hf, ids)
    # Relative check: fp32 rounding scales with the logits (atol = 1e-4 * max |logit|).
    torch.testing.assert_close(logits, expected, atol=1e-4 * expected.abs().max().item(), rtol=RTOL)
    last = logits[:, -1]
    for params in (SamplingParams(), SamplingParams(temperature=0.5, top_p=0.9, min_p=0.1, top_k=5)):
        probs = torch.softmax(process_logits(last, params), dim=-1)
        assert torch.isfinite(probs).all()
        tokens = sample(last, params, generator=torch.Generator().manual_seed(0))
        gap = last.topk(2).values  # top-1 beats top-2 by hundreds: the argmax has probability ~1
        assert ((gap[:, 0] - gap[:, 1]) > 50).all()
        assert torch.equal(tokens, last.argmax(dim=-1))


# ---- the course's trained model (built by datasets/train.py; skipped until it exists) ---------------


COURSE_MODEL = course_model_dir()


@pytest.mark.points(2)
@pytest.mark.skipif(COURSE_MODEL is None, reason="datasets/models/course-llama is not built")
def test_trained_course_model_matches_hf():
    folder = COURSE_MODEL
    model = load_model(folder)  # fp32 from the same (bf16) checkpoint
    ids = random_ids(2, 24, vocab=model.config.vocab_size, seed=100)
    with torch.no_grad(), oracle():
        from transformers import LlamaForCausalLM

        hf = LlamaForCausalLM.from_pretrained(folder, attn_implementation="eager").float().eval()
        expected = hf(input_ids=ids, use_cache=False).logits
        eos, pad = hf.config.eos_token_id, hf.config.pad_token_id
        reference = hf.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=16, do_sample=False,
                                eos_token_id=eos, pad_token_id=pad)  # fmt: skip
    with torch.no_grad():
        ours = model(ids)
    torch.testing.assert_close(ours, expected, atol=1e-3, rtol=1e-4)  # trained logits reach ~20: atol 1e-3
    assert generate(model, ids, max_new_tokens=16, eos_token_id=eos, pad_token_id=pad).tolist() == reference.tolist()


# --- config.json in every RoPE layout -----------------------------------------------------------
# transformers 4 writes `rope_theta` at the top level and the scaling in `rope_scaling` (its type
# under `type`, later `rope_type`); transformers 5 writes both inside `rope_parameters` (type
# "default" when unscaled). Oracle: transformers' LlamaConfig. A config in each layout must read and
# run like transformers; a scaled RoPE (not implemented here) must raise ValueError under either key.

FIELDS = ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
          "num_key_value_heads", "head_dim", "rms_norm_eps", "max_position_embeddings", "tie_word_embeddings")
SCALINGS = {
    "linear": {"factor": 2.0},
    "yarn": {"factor": 4.0, "original_max_position_embeddings": 512},
    "llama3": {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 512},
}


def layouts(config: dict, theta: float, scaling: dict | None = None) -> dict[str, dict]:
    """`config` (its RoPE keys dropped) with theta and scaling written as transformers 4 and 5 do."""
    bare = {k: v for k, v in config.items() if k not in ("rope_theta", "rope_scaling", "rope_parameters")}
    legacy_type = None if scaling is None else {("type" if k == "rope_type" else k): v for k, v in scaling.items()}
    return {
        "legacy rope_scaling + rope_theta": bare | {"rope_theta": theta, "rope_scaling": scaling},
        "legacy rope_scaling with 'type'": bare | {"rope_theta": theta, "rope_scaling": legacy_type},
        "current rope_parameters": bare | {"rope_parameters": {"rope_type": "default", "rope_theta": theta} | (scaling or {})},
    }


def hf_numbers(config: dict) -> dict:
    """What transformers' LlamaConfig reads from `config`: FIELDS, rope_theta and the RoPE type."""
    from transformers import LlamaConfig

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        hf = LlamaConfig(**config)
    return {f: getattr(hf, f) for f in FIELDS} | {"rope_theta": float(hf.rope_parameters["rope_theta"]),
                                                  "rope_type": hf.rope_parameters["rope_type"]}


@in_worker
def read_config(config: dict) -> dict:
    """In the worker: the package's LlamaConfig.from_hf_dict as a plain dict (or the ValueError's text)."""
    from transformer import LlamaConfig

    try:
        return dataclasses.asdict(LlamaConfig.from_hf_dict(config))
    except ValueError as e:
        return {"ValueError": str(e)}


def course_config() -> dict:
    return json.loads((coursedata.model_path("course-llama") / "config.json").read_text())


def checkpoint_logits_per_layout(make_hf_llama, hf_logits, theta: float):
    """The same checkpoint with its config.json rewritten in each layout: (folder, {layout: (ours, HF's)})."""
    hf, folder = make_hf_llama(seed=33, rope_theta=theta)
    ids = torch.randint(0, 128, (1, 24), generator=torch.Generator().manual_seed(34))
    expected = hf_logits(hf, ids)
    saved = json.loads((Path(folder) / "config.json").read_text())
    results = {}
    for layout, cfg in layouts(saved, theta).items():
        (Path(folder) / "config.json").write_text(json.dumps(cfg))
        with torch.no_grad():
            results[layout] = (load_model(folder)(ids), expected)
    return folder, saved, results


@pytest.mark.points(2)
def test_each_layout_reads_like_transformers_and_runs_like_hf(make_hf_llama, hf_logits):
    """A checkpoint (rope_theta 1000) with config.json in each layout gives HF's logits (atol = rtol
    = 1e-4, fp32, as the other model tests); course-llama's config in each layout, at two thetas,
    reads the numbers transformers' LlamaConfig reads."""
    _, _, results = checkpoint_logits_per_layout(make_hf_llama, hf_logits, 1000.0)
    for layout, (got, expected) in results.items():
        torch.testing.assert_close(got, expected, atol=1e-4, rtol=1e-4,
                                   msg=lambda m, layout=layout: f"config.json as {layout}, rope_theta 1000: {m}")
    for theta in (10000.0, 500000.0):
        for layout, cfg in layouts(course_config(), theta).items():
            expected = hf_numbers(cfg)
            assert expected["rope_type"] == "default"
            got = read_config(cfg)
            assert "ValueError" not in got, f"course-llama's config as {layout} (theta {theta}) was refused: {got}"
            mine = {f: got[f] for f in (*FIELDS, "rope_theta")}
            want = {f: expected[f] for f in (*FIELDS, "rope_theta")}
            assert mine == want, f"course-llama's config as {layout}: read {mine}, transformers reads {want}"


@pytest.mark.points(1)
def test_a_scaled_rope_is_refused_under_either_key(make_hf_llama, hf_logits):
    """The unscaled checkpoint loads and runs (the valid case), and the same checkpoint with each
    RoPE scaling written in each layout raises ValueError: transformers reads the scaling there,
    and this model implements only the default RoPE."""
    folder, saved, results = checkpoint_logits_per_layout(make_hf_llama, hf_logits, 1000.0)
    for layout, (got, expected) in results.items():
        torch.testing.assert_close(got, expected, atol=1e-4, rtol=1e-4,
                                   msg=lambda m, layout=layout: f"config.json as {layout}, rope_theta 1000: {m}")
    for kind, params in SCALINGS.items():
        for layout, cfg in layouts(saved, 1000.0, {"rope_type": kind, **params}).items():
            assert hf_numbers(cfg)["rope_type"] == kind  # transformers reads the scaling from this layout
            (Path(folder) / "config.json").write_text(json.dumps(cfg))
            with pytest.raises(ValueError):
                load_model(folder)
                pytest.fail(f"a {kind} RoPE scaling written as {layout} was loaded as plain RoPE: this model "
                            "implements only the default RoPE, so such a config must raise ValueError")
