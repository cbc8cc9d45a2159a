"""Multi-LoRA: the gathered low-rank product against a per-row loop, a peft adapter folder read
into a LoRAAdapter, and a server that serves the base model and an adapter side by side, each
reply equal to HF greedy of its own model (for the adapter: peft's `merge_and_unload()`)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest
import torch
from conftest import MODEL_NAME, Expected, decode, encode, hf_model, model_dir, openai_client, serving, write_adapters
from lora_oracle import lora_weights, make_adapters
from wire import post

from autograder.testing import in_worker
from serving import lora_delta


def loop_delta(x, slots, a, b, scaling):
    """The oracle: row by row, scaling[s] * b[s] @ (a[s] @ x[t]), zero for slot 0."""
    out = torch.zeros(x.shape[0], b.shape[1], dtype=x.dtype)
    for t, s in enumerate(slots.tolist()):
        if s != 0:
            out[t] = scaling[s] * (b[s] @ (a[s] @ x[t]))
    return out


@pytest.mark.points(1)
@pytest.mark.parametrize("d_in,d_out", [(24, 24), (24, 10)])
def test_lora_delta_matches_a_per_row_loop(tol, d_in, d_out):
    """Slots in arbitrary order, three adapters and the base (slot 0) in one batch: each row equal to
    the per-row product at the "lora delta, fp32" tolerance; slot-0 rows exactly zero."""
    g = torch.Generator().manual_seed(3)
    slots = torch.tensor([2, 0, 1, 3, 3, 0, 1, 2, 2, 0])
    x = torch.randn(len(slots), d_in, generator=g)
    a, b = torch.randn(4, 5, d_in, generator=g), torch.randn(4, d_out, 5, generator=g)
    a[0], b[0] = 0, 0  # slot 0: the base model has no adapter
    scaling = torch.tensor([0.0, 2.0, 0.5, 1.25])
    got = lora_delta(x.clone(), slots.clone(), a.clone(), b.clone(), scaling.clone())
    want = loop_delta(x, slots, a, b, scaling)
    assert got.shape == want.shape, f"lora_delta returned {tuple(got.shape)}, want {tuple(want.shape)}"
    base_rows = (slots == 0).nonzero().squeeze(1)
    assert torch.equal(got[base_rows], torch.zeros_like(got[base_rows])), "rows of slot 0 must get exactly zero"
    for t in range(len(slots)):
        torch.testing.assert_close(got[t], want[t], **tol("lora delta, fp32"),
                                   msg=lambda m, t=t: f"row {t} (slot {int(slots[t])}): {m}")


@in_worker
def load_in_worker(folder: str, adapters: dict, name: str) -> tuple:
    """Your load_adapter of adapter `name` against minivllm's model: its fields, as plain values."""
    from minivllm import LLM
    from serving import ENGINE_DEFAULTS, load_adapter

    llm = LLM(folder, max_model_len=64, **{**ENGINE_DEFAULTS, "num_kv_blocks": 8})
    ad = load_adapter(name, write_adapters(adapters)[name], llm.model_runner.model)
    return ad.r, float(ad.lora_alpha), float(ad.scaling), sorted(ad.target_modules), {
        m: (a.clone(), b.clone()) for m, (a, b) in ad.weights.items()}


@pytest.fixture(scope="module")
def adapters(tmp_path_factory):
    return make_adapters(hf_model(), tmp_path_factory.mktemp("lora"), ("ahab",))


@pytest.mark.points(2)
def test_load_adapter_reads_a_peft_folder(adapters):
    """r, lora_alpha, target_modules as adapter_config.json says; scaling = lora_alpha / r (relative
    1e-12); each module's A (r, in) and B (out, r) exactly peft's tensors, under minivllm's module names."""
    ahab = adapters["ahab"]
    r, alpha, scaling, targets, weights = load_in_worker(model_dir(), {"ahab": ahab.files}, "ahab")
    cfg = ahab.config
    assert (r, alpha) == (cfg["r"], cfg["lora_alpha"]), f"r, lora_alpha {(r, alpha)}, the config says {(cfg['r'], cfg['lora_alpha'])}"
    assert scaling == pytest.approx(cfg["lora_alpha"] / cfg["r"], rel=1e-12), f"scaling {scaling}, want lora_alpha / r"
    assert targets == sorted(cfg["target_modules"]), f"target_modules {targets}, the config says {cfg['target_modules']}"
    want = lora_weights(ahab)
    assert sorted(weights) == sorted(want), f"modules {sorted(weights)[:4]}..., peft's {sorted(want)[:4]}..."
    for m, (a, b) in want.items():
        assert torch.equal(weights[m][0], a) and torch.equal(weights[m][1], b), f"{m}: A or B differ from the file's lora_A / lora_B"


@in_worker
def offline_in_worker(folder: str, adapters: dict, requests: list) -> list:
    """Your AsyncEngine over your LoRAManager, without HTTP, in one event loop of the worker: every
    request (adapter name or None, prompt ids, max_tokens) queued at once; each one's tokens."""
    import asyncio

    from minivllm import LLM, SamplingParams
    from serving import ENGINE_DEFAULTS, AsyncEngine, LoRAManager, load_adapter

    llm = LLM(folder, max_model_len=64, **{**ENGINE_DEFAULTS, "num_kv_blocks": 16, "enable_prefix_caching": False})
    model, paths = llm.model_runner.model, write_adapters(adapters)
    engine = AsyncEngine(llm, LoRAManager(model, [load_adapter(n, paths[n], model) for n in adapters]))

    async def one(adapter, ids: list[int], n: int) -> list[int]:
        params = SamplingParams(temperature=0, max_tokens=n)
        return [t async for delta in engine.generate(ids, params, None, adapter) for t in delta.token_ids]

    async def main() -> list:
        engine.start()
        try:
            return await asyncio.gather(*(one(*req) for req in requests))
        finally:
            await engine.stop()

    return asyncio.run(main())


@pytest.mark.points(2)
def test_engine_runs_each_request_through_its_adapter(adapters, tol):
    """Without HTTP: the adapter and the base model on one prompt, and a 1-token prompt through the
    adapter, in one batch; each equal to HF greedy of its own model up to HF's first near-tie
    ("greedy near-tie")."""
    near = tol("greedy near-tie")["atol"]
    requests = [["ahab", encode("Call me Ishmael."), 8], [None, encode("Call me Ishmael."), 8], ["ahab", [412], 6]]
    got = offline_in_worker(model_dir(), {"ahab": adapters["ahab"].files}, requests)
    for i, ((name, ids, n), tokens) in enumerate(zip(requests, got)):
        want = Expected(ids, n, near, model=adapters[name].merged if name else None)
        want.check_text(decode(tokens), f"request {i} (adapter {name or 'none: the base model'}, {len(ids)} prompt tokens)")


@pytest.fixture(scope="module")
def port(adapters):
    with serving(max_model_len=128, lora={"ahab": adapters["ahab"].files}, num_kv_blocks=32) as p:
        yield p


def complete(port: int, model: str, prompt: str, n: int) -> str:
    with openai_client(port) as c:
        return c.completions.create(model=model, prompt=prompt, max_tokens=n, temperature=0).choices[0].text


@pytest.mark.points(2)
def test_server_serves_the_base_and_an_adapter_at_once(port, adapters, tol):
    """/v1/models lists the base model and the adapter; a base and an adapter request sent at once each
    equal HF greedy of their own model (near-ties: the "greedy near-tie" tolerance); another name is a 404."""
    with openai_client(port) as c:
        names = [m.id for m in c.models.list().data]
    assert names == [MODEL_NAME, "ahab"], f"/v1/models lists {names}, want [{MODEL_NAME!r}, 'ahab']"
    near, prompt = tol("greedy near-tie")["atol"], "Call me Ishmael."
    base = Expected(encode(prompt), 10, near)
    ahab = Expected(encode(prompt), 10, near, model=adapters["ahab"].merged)
    assert base.tokens != ahab.tokens, "test design: the adapter must change the greedy text"
    with ThreadPoolExecutor(2) as pool:
        got = list(pool.map(lambda m: complete(port, m, prompt, 10), [MODEL_NAME, "ahab"]))
    base.check_text(got[0], f"the base model's request (model {MODEL_NAME!r}) beside an adapter's")
    ahab.check_text(got[1], "adapter 'ahab' (HF greedy of peft's merge_and_unload)")
    r = post(port, "/v1/completions", {"model": "ahab-v2", "prompt": "hi", "max_tokens": 2})
    assert r.status_code == 404 and isinstance(r.json().get("error"), dict), (
        f"an adapter that is not served: status {r.status_code}, want 404 in the error shape ({r.text[:200]})")
