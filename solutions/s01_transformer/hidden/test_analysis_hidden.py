"""The analysis of README "Analysis": each number in answers/decode_numbers.toml against the same
quantity recomputed here from the student's own code on the course model in bfloat16: the
parameters and KV cache their `load_model` and `new_cache` hold, the positions their `generate`
feeds to the model (counted by wrapping its forward), and the FLOPs and bytes of the README's
definitions, evaluated on the shapes of their model object."""

from __future__ import annotations

import functools

import pytest
import torch
from transformer import generate, load_model

from autograder.testing import course_model_dir, in_worker, numeric_answer

PROMPT_LEN, NEW_TOKENS, CONTEXT, BATCH = 32, 32, 1024, 16


COURSE_MODEL = course_model_dir()
needs_model = pytest.mark.skipif(COURSE_MODEL is None, reason="datasets/models/course-llama is not built")


@in_worker
def measure(folder: str) -> dict[str, int]:
    """Beside the student's code: what their model object holds and what their generate feeds it."""
    torch.set_num_threads(1)
    model = load_model(folder, dtype=torch.bfloat16)
    distinct = {(p.data_ptr(), p.numel()) for p in model.parameters()}  # a tied table is one tensor
    c = model.config
    one, batch = model.new_cache(1, 1), model.new_cache(BATCH, CONTEXT)
    fed: list[int] = []
    forward = model.forward

    def counting(input_ids, *args, **kwargs):
        fed.append(int(input_ids.shape[1]))
        return forward(input_ids, *args, **kwargs)

    model.forward = counting  # generate may call model(...) or model.forward(...): both land here
    prompt = torch.randint(2, c.vocab_size, (1, PROMPT_LEN), generator=torch.Generator().manual_seed(0))
    positions = []
    for use_cache in (True, False):
        fed.clear()
        generate(model, prompt, max_new_tokens=NEW_TOKENS, use_cache=use_cache)
        positions.append(sum(fed))
    return {
        "num_parameters": sum(n for _, n in distinct),
        "matmul_weights": sum(m.weight.numel() for m in model.modules() if isinstance(m, torch.nn.Linear)),
        "layers": c.num_hidden_layers, "heads": c.num_attention_heads, "head_dim": c.head_dim,
        "kv_bytes_per_token": one.k.nbytes + one.v.nbytes,
        "kv_bytes_batch": batch.k.nbytes + batch.v.nbytes,
        "element_bytes": model.embed_tokens.weight.element_size(),
        "positions_cached": positions[0], "positions_uncached": positions[1],
    }  # fmt: skip


@functools.cache
def facts() -> dict[str, float]:
    """The README's definitions evaluated on the student's model: T new positions over S keys."""
    m = measure(str(COURSE_MODEL))

    def flop(t: int, s: int) -> int:  # every Linear for each position; q.k and p.v for each pair computed
        return 2 * t * m["matmul_weights"] + 4 * m["layers"] * m["heads"] * m["head_dim"] * t * s

    moved = m["element_bytes"] * m["matmul_weights"] + CONTEXT * m["kv_bytes_per_token"]  # weights, KV of S slots
    return {
        **m,
        "kv_mib_batch16_ctx1024": m["kv_bytes_batch"] / 2**20,
        "decode_flop_ctx1024": flop(1, CONTEXT),
        "prefill_flop_1024": flop(CONTEXT, CONTEXT),
        "decode_intensity_ctx1024": flop(1, CONTEXT) / moved,
        "prefill_intensity_1024": flop(CONTEXT, CONTEXT) / moved,
    }


COUNTS = ("num_parameters", "kv_bytes_per_token", "positions_cached", "positions_uncached")
QUANTITIES = ("kv_mib_batch16_ctx1024", "decode_flop_ctx1024", "prefill_flop_1024",
              "decode_intensity_ctx1024", "prefill_intensity_1024")  # fmt: skip


@needs_model
@pytest.mark.points(1)
@pytest.mark.parametrize("key", COUNTS)
def test_numeric_count_matches_your_own_model(key, request, tol):
    answer = numeric_answer(request.config.rootpath, "decode_numbers", key)
    expected = facts()[key]
    assert answer == pytest.approx(expected, abs=tol("numeric answer, count")["atol"]), (
        f"answers/decode_numbers.toml: {key} = {answer:.12g}, but your code gives {expected} (a count is exact)")


@needs_model
@pytest.mark.points(1)
@pytest.mark.parametrize("key", QUANTITIES)
def test_numeric_answer_matches_your_own_model(key, request, tol):
    answer = numeric_answer(request.config.rootpath, "decode_numbers", key)
    expected = facts()[key]
    assert answer == pytest.approx(expected, rel=tol("numeric answer")["rtol"]), (
        f"answers/decode_numbers.toml: {key} = {answer:g}, but your model gives {expected:.4g}")
