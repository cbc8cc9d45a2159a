"""Hidden, multi-LoRA: concurrent requests over the server mixing the base model and two adapters
(different ranks and scalings, prompts of different lengths), each equal to HF greedy of its own
model; an engine step that mixes prefill and decode rows of different adapters; the per-token slot
vector in prepare's row order; the gathered product's edges; bad adapter folders refused with a
ValueError that names the problem; the base weights untouched by serving; prefix caching never
sharing KV across adapters; /v1/models and 404s."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor

import pytest
import torch
from conftest import (
    MODEL_NAME,
    Expected,
    chat_prompt,
    decode,
    encode,
    hf_model,
    model_dir,
    openai_client,
    serving,
    target_weights,
    write_adapters,
)
from lora_oracle import make_adapters
from wire import post

from autograder.testing import in_worker
from serving import lora_delta

LONG = ("It is a truth universally acknowledged, that a single man in possession of a good fortune, must be in "
        "want of a wife. However little known the feelings or views of such a man may be")


@pytest.fixture(scope="module")
def adapters(tmp_path_factory):
    return make_adapters(hf_model(), tmp_path_factory.mktemp("lora"))


@pytest.fixture(scope="module")
def port(adapters):
    lora = {name: ad.files for name, ad in adapters.items()}
    with serving(max_model_len=128, lora=lora, num_kv_blocks=64, max_num_seqs=8) as p:
        yield p


def model_of(adapters, name: str):
    return None if name == MODEL_NAME else adapters[name].merged


def ask(port: int, case: tuple) -> str:
    model, prompt, n, streamed = case
    with openai_client(port) as c:
        if isinstance(prompt, list) and isinstance(prompt[0], dict):
            r = c.chat.completions.create(model=model, messages=prompt, max_tokens=n, temperature=0)
            return r.choices[0].message.content
        if streamed:
            chunks = c.completions.create(model=model, prompt=prompt, max_tokens=n, temperature=0, stream=True)
            return "".join(ch.choices[0].text for ch in chunks if ch.choices)
        return c.completions.create(model=model, prompt=prompt, max_tokens=n, temperature=0).choices[0].text


def ids_of(prompt) -> list[int]:
    if isinstance(prompt, list):
        return encode(chat_prompt(prompt)) if isinstance(prompt[0], dict) else list(prompt)
    return encode(prompt)


CASES = [  # (model, prompt, max_tokens, streamed): three models, short and long prompts, a 1-token prompt
    ("ahab", "Call me Ishmael.", 10, False),
    (MODEL_NAME, "Call me Ishmael.", 10, True),
    ("ishmael", "Call me Ishmael.", 10, False),
    ("ishmael", LONG, 8, True),
    ("ahab", [412], 10, False),
    (MODEL_NAME, LONG, 8, False),
    ("ahab", [{"role": "user", "content": "Who is the captain?"}], 8, False),
    ("ishmael", [300], 10, True),
]


@pytest.mark.points(4)
def test_concurrent_requests_mixing_base_and_two_adapters(port, adapters, tol):
    """Eight clients at once over three models: each reply equal to HF greedy of its own model (the
    base, or peft's merge_and_unload() of its adapter), up to HF's first near-tie ("greedy near-tie").
    The three models' oracles differ on the shared prompt (else the test proves nothing)."""
    near = tol("greedy near-tie")["atol"]
    want = [Expected(ids_of(p), n, near, model=model_of(adapters, m)) for m, p, n, _ in CASES]
    shared = [w.tokens for (m, p, _, _), w in zip(CASES, want) if p == "Call me Ishmael."]
    assert len({tuple(t) for t in shared}) == 3, "test design: the adapters must change the greedy text"
    with ThreadPoolExecutor(len(CASES)) as pool:
        got = list(pool.map(lambda case: ask(port, case), CASES))
    for i, ((m, p, n, s), w, text) in enumerate(zip(CASES, want, got)):
        w.check_text(text, f"request {i} (model {m!r}, prompt {p!r:.40}, stream={s}, {len(CASES)} at once)")


@in_worker
def engine_in_worker(folder: str, adapters: dict, first: list, later: list) -> tuple[list, list]:
    """Your AsyncEngine with your LoRAManager, without HTTP: the `first` requests are queued before
    the first step, the `later` ones once request 0 has its 2nd token (they prefill while the first
    ones decode). Each request's tokens, and each step's entries as (seq_id, num_tokens)."""
    import asyncio

    from minivllm import LLM, SamplingParams
    from serving import ENGINE_DEFAULTS, AsyncEngine, LoRAManager, load_adapter

    steps = []
    llm = LLM(folder, max_model_len=128, on_step=lambda _, batch: steps.append(
        [(e.seq_id, e.num_tokens) for e in batch.entries]),
              **{**ENGINE_DEFAULTS, "num_kv_blocks": 48, "enable_prefix_caching": False})
    model = llm.model_runner.model
    paths = write_adapters(adapters)
    lora = LoRAManager(model, [load_adapter(name, paths[name], model) for name in adapters])

    async def main() -> list:
        engine = AsyncEngine(llm, lora)
        engine.start()
        started = asyncio.Event()

        async def one(i: int, adapter, ids: list[int], n: int, wait: bool) -> list[int]:
            if wait:
                await started.wait()
            tokens = []
            async for delta in engine.generate(ids, SamplingParams(temperature=0, max_tokens=n), None, adapter):
                tokens += delta.token_ids
                if i == 0 and len(tokens) >= 2:
                    started.set()
            return tokens

        try:
            jobs = [one(i, *req, False) for i, req in enumerate(first)]
            jobs += [one(len(first) + i, *req, True) for i, req in enumerate(later)]
            return await asyncio.gather(*jobs)
        finally:
            await engine.stop()

    return asyncio.run(main()), steps


@pytest.mark.points(3)
def test_engine_step_mixing_prefill_and_decode_rows(adapters, tol):
    """A step whose batch order differs from prepare's row order (a 1-token prompt after a longer one;
    prefills joining decodes) across the base model and two adapters: each request equal to HF greedy
    of its own model up to HF's first near-tie ("greedy near-tie"); the steps did mix as planned."""
    near = tol("greedy near-tie")["atol"]
    first = [["ahab", encode("Call me Ishmael."), 8], ["ishmael", [412], 8], [None, encode("The sea"), 8]]
    later = [["ishmael", encode(LONG), 6], [None, [300], 6], ["ahab", encode("Whales of the deep"), 6]]
    got, steps = engine_in_worker(model_dir(), {n: ad.files for n, ad in adapters.items()}, first, later)
    mixed = [s for s in steps if any(n == 1 for _, n in s) and any(n > 1 for _, n in s)]
    assert mixed, f"test design: no step mixed 1-token and longer rows: {steps[:4]}"
    for i, ((adapter, ids, n), tokens) in enumerate(zip(first + later, got)):
        want = Expected(ids, n, near, model=model_of(adapters, adapter or MODEL_NAME))
        want.check_text(decode(tokens), f"engine request {i} (adapter {adapter or 'none'}, {len(ids)} prompt tokens)")


@in_worker
def slots_in_worker(rows: list, slot_of: dict):
    """Your token_slots of entries given as (seq_id, num_tokens), with slot_of's mapping."""
    from types import SimpleNamespace

    from serving import token_slots

    entries = [SimpleNamespace(seq_id=s, num_tokens=n) for s, n in rows]
    return token_slots(entries, slot_of.__getitem__).tolist()


@pytest.mark.points(2)
def test_token_slots_follow_prepares_row_order():
    """Exact: one slot per token row, the one-token entries first, then the others, each group in the
    batch's order (minivllm's ModelRunner.prepare)."""
    rows = [(5, 3), (2, 1), (7, 4), (9, 1), (4, 2), (8, 1)]
    slot_of = {5: 1, 2: 2, 7: 0, 9: 1, 4: 2, 8: 0}
    ordered = [r for r in rows if r[1] == 1] + [r for r in rows if r[1] != 1]
    want = [slot_of[s] for s, n in ordered for _ in range(n)]
    got = slots_in_worker(rows, slot_of)
    assert got == want, f"slots of entries {rows} (seq_id, num_tokens): got {got}, want {want} (prepare's row order)"


@pytest.mark.points(1)
def test_lora_delta_edges(tol):
    """A batch of base rows only gets exact zeros; adapters of different ranks zero-padded in one stack;
    a single row; the last slot (at the "lora delta, fp32" tolerance)."""
    g = torch.Generator().manual_seed(5)
    x = torch.randn(6, 12, generator=g)
    a, b = torch.randn(3, 4, 12, generator=g), torch.randn(3, 8, 4, generator=g)
    a[0], b[0] = 0, 0
    a[1, 2:], b[1, :, 2:] = 0, 0  # adapter 1 has rank 2, padded to 4
    scaling = torch.tensor([0.0, 3.0, 0.25])
    zero = lora_delta(x.clone(), torch.zeros(6, dtype=torch.long), a.clone(), b.clone(), scaling.clone())
    assert torch.equal(zero, torch.zeros(6, 8)), "a batch without adapters must get an exact zero delta"
    for slots in ([1, 1, 1, 2, 2, 0], [2], [0, 2, 0, 1, 0, 0]):
        s = torch.tensor(slots)
        got = lora_delta(x[:len(slots)].clone(), s, a.clone(), b.clone(), scaling.clone())
        want = torch.stack([scaling[k] * (b[k] @ (a[k] @ x[t])) for t, k in enumerate(slots)])
        torch.testing.assert_close(got, want, **tol("lora delta, fp32"), msg=lambda m, s=slots: f"slots {s}: {m}")


@in_worker
def load_error(folder: str, files: dict) -> str:
    """Your load_adapter on one adapter folder: "ok" or the ValueError's message."""
    from minivllm import LLM
    from serving import ENGINE_DEFAULTS, load_adapter

    llm = LLM(folder, max_model_len=64, **{**ENGINE_DEFAULTS, "num_kv_blocks": 8})
    try:
        ad = load_adapter("x", write_adapters({"x": files})["x"], llm.model_runner.model)
    except ValueError as e:
        return f"ValueError: {e}"
    return f"ok {ad.scaling!r}"


def variant(files: dict, config: dict | None = None, drop: str | None = None, rename: tuple | None = None,
            shrink: str | None = None, narrow: str | None = None) -> dict:
    """The adapter's files with its config updated, a key dropped, renamed or cut to a wrong shape
    (shrink: one column less, the rank's side of B; narrow: half the columns, the input side of A)."""
    from safetensors.torch import load, save

    state = load(files["adapter_model.safetensors"])
    if drop:
        del state[drop]
    if rename:
        state[rename[1]] = state.pop(rename[0])
    if shrink:
        state[shrink] = state[shrink][:, :-1].contiguous()
    if narrow:
        state[narrow] = state[narrow][:, : state[narrow].shape[1] // 2].contiguous()
    cfg = {**json.loads(files["adapter_config.json"]), **(config or {})}
    return {"adapter_config.json": json.dumps(cfg).encode(), "adapter_model.safetensors": save(state)}


@in_worker
def unknown_adapter_in_worker(folder: str, adapters: dict) -> tuple[str, bool]:
    """Your AsyncEngine asked for an adapter it does not serve: what generate raised, and whether the
    engine still has unfinished requests after that."""
    import asyncio

    from minivllm import LLM, SamplingParams
    from serving import ENGINE_DEFAULTS, AsyncEngine, LoRAManager, load_adapter

    llm = LLM(folder, max_model_len=64, **{**ENGINE_DEFAULTS, "num_kv_blocks": 8, "enable_prefix_caching": False})
    model = llm.model_runner.model
    paths = write_adapters(adapters)
    lora = LoRAManager(model, [load_adapter(name, paths[name], model) for name in adapters])

    async def main() -> str:
        engine = AsyncEngine(llm, lora)
        engine.start()
        try:
            async for _ in engine.generate([412, 300], SamplingParams(temperature=0, max_tokens=50), None, "nobody"):
                pass
        except Exception as e:  # noqa: BLE001  what it raised is the answer
            return type(e).__name__
        finally:
            await engine.stop()
        return "nothing"

    raised = asyncio.run(main())
    return raised, llm.has_unfinished_requests()


@pytest.mark.points(1)
def test_an_unknown_adapter_is_refused_before_the_request_is_queued(adapters):
    """AsyncEngine.generate with an adapter it does not serve raises ValueError and leaves the engine
    without the request (a request queued first would decode for nobody and hold its KV blocks)."""
    files = {"ahab": adapters["ahab"].files}
    raised, unfinished = unknown_adapter_in_worker(model_dir(), files)
    assert raised == "ValueError", f"generate(adapter='nobody') raised {raised}, want ValueError"
    assert not unfinished, "after generate(adapter='nobody') refused, the engine still has an unfinished request"


@pytest.mark.points(2)
def test_bad_adapter_folders_are_value_errors(adapters):
    """Each bad folder a ValueError whose message names the problem; the valid folder loads (and with
    use_rslora its scaling is lora_alpha / sqrt(r), exactly as a float)."""
    files = adapters["ahab"].files
    key = "base_model.model.model.layers.0.self_attn.q_proj.lora_{}.weight"
    cases = [
        ("no adapter_config.json", {"adapter_model.safetensors": files["adapter_model.safetensors"]}, "adapter_config"),
        ("bias 'all'", variant(files, {"bias": "all"}), "bias"),
        ("a target that is not a linear LoRA can adapt", variant(files, {"target_modules": ["q_proj", "lm_head"]}), "lm_head"),
        ("lora_A without lora_B", variant(files, drop=key.format("B")), "layers.0.self_attn.q_proj"),
        ("a module the model does not have", variant(files, rename=(key.format("A"), key.format("A").replace("layers.0", "layers.9"))),
         "layers.9"),
        ("r in the config differs from the tensors", variant(files, {"r": 8}), ("_proj", "r=8", "rank", "shape")),
        ("B narrower than r", variant(files, shrink=key.format("B")), ("q_proj",)),
        ("A with the rank right but half the linear's inputs", variant(files, narrow=key.format("A")), ("q_proj",)),
        ("weights of a linear the config's target_modules leaves out (v_proj)",
         variant(files, {"target_modules": ["q_proj", "down_proj"]}), ("v_proj",)),
    ]
    for what, bad, word in cases:
        msg = load_error(model_dir(), bad)
        assert msg.startswith("ValueError"), f"{what}: load_adapter answered {msg[:200]!r}, want a ValueError"
        words = (word,) if isinstance(word, str) else word
        assert any(w in msg for w in words), f"{what}: the ValueError must name the problem ({' or '.join(words)}): {msg[:300]!r}"
    assert load_error(model_dir(), files) == f"ok {2.0!r}", "the valid adapter (lora_alpha 8, r 4) must load with scaling 2.0"
    rs = load_error(model_dir(), variant(files, {"use_rslora": True}))
    assert rs == f"ok {8 / 4 ** 0.5!r}" or rs.startswith("ValueError"), (
        f"use_rslora: scaling must be lora_alpha / sqrt(r) = {8 / 4 ** 0.5} (or the adapter refused): {rs[:200]!r}")


@pytest.mark.points(1)
def test_serving_adapters_leaves_the_base_weights_alone(port, adapters, tol):
    """After adapter requests, every target linear's base weight equals the checkpoint's exactly (a
    per-request merge changes them), and a base request still equals base HF greedy ("greedy near-tie")."""
    ask(port, ("ahab", "The whale", 4, False))
    ask(port, ("ishmael", "The whale", 4, False))
    weights = target_weights(port)
    hf = dict(hf_model().named_parameters())
    assert len(weights) == 5 * 7, f"{len(weights)} target linears, the course model has 35"
    for name, w in weights.items():
        assert torch.equal(w, hf[f"{name}.weight"]), f"{name}: the base weight changed while serving adapters"
    Expected(encode("The whale"), 6, tol("greedy near-tie")["atol"]).check_text(
        ask(port, (MODEL_NAME, "The whale", 6, False)), "a base request after adapter requests")


@pytest.mark.points(1)
def test_a_cached_prefix_is_not_shared_across_adapters(port, adapters, tol):
    """The same long prompt (two full KV blocks) first for the base model, then for adapter 'ahab',
    which adapts v_proj: its reply equals its own oracle ("greedy near-tie"): the base model's cached
    KV must not serve it (served from the cache, its first token already differs)."""
    near = tol("greedy near-tie")["atol"]
    prompt = LONG + " in the first"
    Expected(encode(prompt), 4, near).check_text(ask(port, (MODEL_NAME, prompt, 4, False)), "the base request")
    want = Expected(encode(prompt), 8, near, model=adapters["ahab"].merged)
    want.check_text(ask(port, ("ahab", prompt, 8, False)), "adapter 'ahab' after the base model on the same prompt")


@pytest.mark.points(1)
def test_models_lists_every_adapter_and_unknown_names_are_404(port):
    """Exact: /v1/models lists the base model then each adapter, with its parent; an unknown name is a
    404 in the error shape on both endpoints."""
    r = httpx_get(port, "/v1/models")
    cards = r.json()["data"]
    assert [c["id"] for c in cards] == [MODEL_NAME, "ahab", "ishmael"], f"/v1/models: {[c['id'] for c in cards]}"
    assert all(c.get("parent") == MODEL_NAME for c in cards[1:]), f"an adapter's card names its parent: {cards[1:]}"
    for path, body in [("/v1/completions", {"prompt": "hi"}), ("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}]})]:
        r = post(port, path, {"model": "Ahab", "max_tokens": 2, **body})
        assert r.status_code == 404, f"{path} with model 'Ahab' (not served: names are case-sensitive): status {r.status_code}"
        assert isinstance(r.json().get("error"), dict), f"error shape: {r.text[:200]}"


def httpx_get(port: int, path: str):
    import httpx

    return httpx.get(f"http://127.0.0.1:{port}{path}", timeout=30)
