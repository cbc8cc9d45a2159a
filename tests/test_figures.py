"""The course figures (course/figures/): the build runs and writes small PNGs, and the numbers each
figure plots (its `data()`) agree with a source independent of the code that computed them."""

from __future__ import annotations

import importlib
import json
import math
import os
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

if str(Path(__file__).resolve().parents[1]) not in sys.path:  # `pytest` run without `python -m`
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from course.figures import FIGURES
from course.figures.build import main as build_main

FIG = {name: importlib.import_module(f"course.figures.{name}") for name in FIGURES}
MAX_PNG_BYTES = 150 * 1024


@pytest.fixture(scope="module", autouse=True)
def reference_imports_stay_in_this_module():
    """The figures import reference packages (kvcache, transformer, ...) from solutions/<id> and
    put those folders on sys.path; the rest of the test session must not see them."""
    path = list(sys.path)
    yield
    sys.path[:] = path
    solutions = Path(__file__).resolve().parents[1] / "solutions"
    for name, module in list(sys.modules.items()):
        if solutions in Path(getattr(module, "__file__", None) or "/").resolve().parents:
            del sys.modules[name]


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    out = tmp_path_factory.mktemp("figures")
    assert build_main(["--out", str(out)]) == 0
    return out


@pytest.mark.parametrize("name", FIGURES)
def test_build_writes_a_small_png(built, name):
    data = (built / f"{name}.png").read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert 5_000 < len(data) < MAX_PNG_BYTES


def test_rebuild_is_byte_identical(built, tmp_path):
    FIG["causal_mask"].draw(FIG["causal_mask"].data(), tmp_path / "again.png")
    assert (tmp_path / "again.png").read_bytes() == (built / "causal_mask.png").read_bytes()


# --- 1. float formats vs torch.finfo and torch's own casts ---------------------------------------
DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16,
          "fp8_e4m3fn": torch.float8_e4m3fn, "fp8_e5m2": torch.float8_e5m2}


def test_fp_formats_against_torch():
    rows = FIG["fp_formats"].data()
    assert [r["name"] for r in rows] == list(DTYPES)
    x = torch.tensor(FIG["fp_formats"].EXAMPLE, dtype=torch.float32)
    for r in rows:
        dt, fi = DTYPES[r["name"]], torch.finfo(DTYPES[r["name"]])
        assert r["width"] == fi.bits == 1 + r["exp_bits"] + r["man_bits"]
        assert r["eps"] == fi.eps
        assert r["max_finite"] == fi.max
        assert r["min_normal"] == fi.smallest_normal == 2.0 ** (1 - r["bias"])
        int_dt = {8: torch.uint8, 16: torch.int16, 32: torch.int32}[fi.bits]
        expected_bits = int(x.to(dt).view(int_dt).item()) & (2**fi.bits - 1)
        assert r["bits"] == expected_bits, r["name"]
        assert r["value"] == float(x.to(dt).float())


# --- 2. RoPE vs the definition and HF's rotate_half ----------------------------------------------
def test_rope_pairs_against_hf_and_the_formula():
    from transformers.models.llama.modeling_llama import rotate_half

    d = FIG["rope_pairs"].data()
    dim = d["head_dim"]
    i = np.arange(dim // 2)
    np.testing.assert_allclose(d["pair_angle"], d["theta"] ** (-2.0 * i / dim), rtol=1e-5)
    assert d["dim_angle"][: dim // 2] == d["dim_angle"][dim // 2 :]
    for k in range(dim):
        rotated = rotate_half(torch.eye(dim)[k])
        assert d["rotate_half_partner"][k] == int(rotated.nonzero().item()) == (k + dim // 2) % dim
        assert d["interleaved_partner"][k] == (k + 1 if k % 2 == 0 else k - 1)


# --- 3. causal mask vs tril(diagonal=c) ----------------------------------------------------------
def test_causal_mask_against_tril():
    for case in FIG["causal_mask"].data():
        q, c = case["q"], case["c"]
        expected = torch.ones(q, c + q).tril(diagonal=c).bool().numpy()
        np.testing.assert_array_equal(case["mask"], expected)


# --- 4. roofline vs first-principles counts ------------------------------------------------------
def test_roofline_against_first_principles():
    mod = FIG["roofline"]
    d = mod.data()
    for dev in d["devices"].values():
        assert dev["ridge"] == pytest.approx(dev["peak"] / dev["mem_bw"])
        np.testing.assert_allclose(dev["roof"], np.minimum(dev["peak"], d["intensity"] * dev["mem_bw"]))
    assert d["devices"]["H100 SXM"]["ridge"] == pytest.approx(295, abs=1)  # course/stages/00-hardware.md
    assert d["devices"]["H200"]["ridge"] == pytest.approx(206, abs=1)
    cfg = json.loads(mod.MODEL_CONFIG.read_text())
    h, hkv, dm, f = (cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["hidden_size"],
                     cfg["intermediate_size"])
    hd, b, s, m, n = dm // h, 2, mod.CONTEXT, mod.PREFILL_TOKENS, mod.BATCH
    expected = [  # (flops, bytes, bound) in the figure's order
        (2 * dm * f, (f + f * dm + dm) * b, "memory"),
        (2 * n * dm * f, (n * f + f * dm + n * dm) * b, "memory"),
        (2 * m * dm * f, (m * f + f * dm + m * dm) * b, "compute"),
        (4 * h * s * hd, (2 * hkv * s + 2 * h) * hd * b, "memory"),
        (2 * h * s * s * hd, (2 * h + 2 * hkv) * s * hd * b, "compute"),
    ]
    assert len(d["points"]) == len(expected)
    for p, (flops, nbytes, bound) in zip(d["points"].values(), expected):
        assert (p["flops"], p["bytes"]) == (pytest.approx(flops), pytest.approx(nbytes))
        assert p["bound"] == {"H100 SXM": bound, "H200": bound}


# --- 5. FlashAttention tiles vs tril, online softmax vs torch.softmax ----------------------------
def test_flash_tiles_cover_exactly_the_causal_triangle():
    mod = FIG["flash_tiling"]
    d = mod.data()
    bm, bn, n = d["block_m"], d["block_n"], d["seq_len"]
    assert bm % bn == 0  # the kernel's causal loop split needs it
    visible = torch.ones(n, n).tril().bool()
    for (i, j), kind in np.ndenumerate(d["grid"]):
        tile = visible[i * bm : (i + 1) * bm, j * bn : (j + 1) * bn]
        if kind == mod.FULL:
            assert tile.all()
        elif kind == mod.SKIPPED:
            assert not tile.any()
        else:
            assert tile.any() and not tile.all()


def test_online_softmax_against_torch():
    d = FIG["flash_tiling"].data()
    s, v, b, on = torch.tensor(d["scores"]), torch.tensor(d["values"]), d["block"], d["online"]
    torch.testing.assert_close(torch.tensor(on["o"]), torch.softmax(s, 0) @ v, rtol=0, atol=1e-12)
    assert on["lse"] == pytest.approx(float(torch.logsumexp(s, 0)), abs=1e-12)
    for k in range(len(on["m"])):  # the state after k + 1 blocks is softmax over those keys only
        prefix = s[: (k + 1) * b]
        assert on["m"][k] == float(prefix.max())
        assert on["l"][k] == pytest.approx(float(torch.exp(prefix - prefix.max()).sum()), rel=1e-12)
        torch.testing.assert_close(torch.tensor(on["out"][k]), torch.softmax(prefix, 0) @ v[: (k + 1) * b],
                                   rtol=0, atol=1e-12)
    assert all(np.diff(on["m"]) > 0)  # the example rescales at every block, as the figure claims


# --- 6. paged slots vs the formula ---------------------------------------------------------------
def test_slot_mapping_against_the_formula():
    d = FIG["paged_slots"].data()
    b, used = d["block_size"], []
    for s in d["live"]:
        table = s["block_table"]
        assert len(table) == math.ceil(s["num_tokens"] / b)
        assert s["slots"] == [table[p // b] * b + p % b for p in range(s["num_tokens"])]
        used += table
    assert len(set(used)) == len(used)  # no block is owned twice
    assert sorted(used + d["free_blocks"]) == list(range(d["num_blocks"]))
    s3 = next(s for s in d["live"] if s["seq_id"] == 3)
    assert s3["block_table"] != list(range(s3["block_table"][0], s3["block_table"][0] + len(s3["block_table"])))


# --- 7. prefix caching vs longest common prefixes ------------------------------------------------
def _lcp(a: list[int], b: list[int]) -> int:
    return len(os.path.commonprefix([a, b]))


def test_prefix_cache_against_common_prefixes():
    d = FIG["prefix_cache"].data()
    prompts, b = d["prompts"], d["block_size"]
    for k, p in enumerate(prompts):
        best = max((_lcp(p, q) for q in prompts[:k]), default=0)
        assert d["chain"][k]["hit_blocks"] == min(best // b, (len(p) - 1) // b)
        assert d["radix_matched"][k] == best
    assert d["radix_tokens"] == len({tuple(p[:i]) for p in prompts for i in range(1, len(p) + 1)})
    by_prefix = {}  # equal hash <=> equal tokens up to the block's end
    for p, row in zip(prompts, d["chain"]):
        for i, h in enumerate(row["hashes"]):
            by_prefix.setdefault(tuple(p[: (i + 1) * b]), set()).add(h)
    assert all(len(hs) == 1 for hs in by_prefix.values())
    assert len({h for hs in by_prefix.values() for h in hs}) == len(by_prefix)


# --- 8. batching timelines vs the reference simulator and the policies' rules --------------------
def test_batching_timelines():
    mod = FIG["batching"]
    kv = mod.reference("s05_kvcache", "kvcache")
    d = mod.data()
    trace = d["requests"]
    for (name, res), cfg in zip(d["runs"].items(), mod.policies(kv).values()):
        sim = kv.simulate(trace, kv.SimConfig(scheduler=cfg, num_blocks=mod.NUM_BLOCKS, block_size=mod.BLOCK_SIZE,
                                              watermark=0.0, enable_prefix_caching=False))
        for r, finish, first in zip(sim.requests, res["finish"], res["first_token"]):
            assert finish == pytest.approx(r.arrival_s + r.e2e_s, rel=1e-12), name
            assert first == pytest.approx(r.arrival_s + r.ttft_s, rel=1e-12), name
        for i, (_, prompt, output) in enumerate(trace):
            mine = [e for s in res["steps"] for e in s["entries"] if e[0] == i]
            assert sum(e[2] for e in mine if e[1]) == prompt
            assert sum(1 for e in mine if not e[1]) == output - 1
        kinds = [{e[1] for e in s["entries"]} for s in res["steps"]]
        assert max(sum(e[2] for e in s["entries"]) for s in res["steps"]) <= cfg.max_num_batched_tokens
        assert any(len(k) == 2 for k in kinds) == (cfg.policy == "decode_first")  # mixed steps
        if cfg.static_batching:
            _assert_no_admission_while_a_batch_decodes(res, len(trace))


def _assert_no_admission_while_a_batch_decodes(res: dict, n: int) -> None:
    steps = res["steps"]
    admitted = [min(s["start"] for s in steps if any(e[0] == i for e in s["entries"])) for i in range(n)]
    decoding = [min(s["start"] for s in steps if any(e[0] == i and not e[1] for e in s["entries"]))
                for i in range(n)]
    for x in range(n):
        for r in range(n):
            assert r == x or not decoding[r] < admitted[x] < res["finish"][r], (x, r)
