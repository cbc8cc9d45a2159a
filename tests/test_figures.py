"""The course figures (course/figures/): the build runs and writes small PNGs, and the numbers each
figure plots (its `data()`) agree with a source independent of the code that computed them."""

from __future__ import annotations

import importlib
import itertools
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


_DATA: dict[str, object] = {}


def fig_data(name: str):
    """FIG[name].data(), computed once per test session (the build and the checks share it)."""
    if name not in _DATA:
        _DATA[name] = FIG[name].data()
    return _DATA[name]


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    out = tmp_path_factory.mktemp("figures")
    assert build_main(["--out", str(out), "causal_mask"]) == 0  # the command line, on one figure
    for name in FIGURES:
        if name != "causal_mask":
            FIG[name].draw(fig_data(name), out / f"{name}.png")
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


# --- the notes and the built figures agree ---------------------------------------------------------
NOTES = Path(__file__).resolve().parents[1] / "course" / "stages"
IMAGE_LINK = r"!\[([^\]]*)\]\(\.\./figures/png/([A-Za-z0-9_]+)\.png\)"


def _note_images() -> dict[str, list[tuple[str, str]]]:
    import re

    return {p.name: re.findall(IMAGE_LINK, p.read_text(encoding="utf-8")) for p in sorted(NOTES.glob("*.md"))}


def test_every_figure_is_shipped_and_shown_in_a_note():
    shown = {name for links in _note_images().values() for _, name in links}
    png_dir = Path(FIG["roofline"].__file__).parent / "png"
    assert not set(FIGURES) - shown, f"figures no stage note shows: {sorted(set(FIGURES) - shown)}"
    assert not shown - set(FIGURES), f"notes show figures no module builds: {sorted(shown - set(FIGURES))}"
    missing = [n for n in FIGURES if not (png_dir / f"{n}.png").is_file()]
    assert not missing, f"not in course/figures/png/ (run `make figures`): {missing}"
    big = {n: (png_dir / f"{n}.png").stat().st_size for n in FIGURES if (png_dir / f"{n}.png").stat().st_size > 64 * 1024}
    assert not big, f"committed PNGs over 64 KiB: {big}"


def test_every_stage_note_has_two_figures_with_alt_text_and_a_caption():
    for note, links in _note_images().items():
        assert len(links) >= 2, f"{note}: {len(links)} figure(s), want >= 2"
        text = (NOTES / note).read_text(encoding="utf-8")
        for alt, name in links:
            assert len(alt.split()) >= 4, f"{note}: figure {name} needs alt text that says what it shows"
            after = text.split(f"(../figures/png/{name}.png)", 1)[1]
            assert after.startswith("\n\n*"), f"{note}: figure {name} needs a blank line, then an italic caption"


def test_no_note_cites_a_figure_file_the_repository_does_not_ship():
    import re

    for note in sorted(NOTES.glob("*.md")):
        for ref in re.findall(r"`(svg/[^`]+)`", note.read_text(encoding="utf-8")):
            pytest.fail(f"{note.name} cites {ref}, which the repository does not ship: cite the chapter instead")


# --- 9. pipeline schedules vs the bubble formula and the schedules' rules ---------------------------
def test_pipeline_timelines():
    mod = FIG["pipeline_schedules"]
    d = fig_data("pipeline_schedules")
    p, m = d["p"], d["m"]
    for name, run in d["runs"].items():
        assert run["makespan"] == (m + p - 1) * (mod.T_F + mod.T_B), name
        assert run["bubble"] == pytest.approx((p - 1) / (m + p - 1), abs=1e-12), name
        end = {(s, k, i): t + dur for s, acts in enumerate(run["actions"]) for k, i, t, dur in acts}
        for s, acts in enumerate(run["actions"]):
            for k, i, t, _ in acts:  # a forward after the previous stage's, a backward after the next one's
                dep = (s - 1, "F", i) if k == "F" else (s + 1, "B", i) if s < p - 1 else (s, "F", i)
                assert dep not in end or t >= end[dep] - 1e-12, (name, s, k, i)
            held = max(h for _, h in run["in_flight"][s])
            assert held == (m if name.startswith("AFAB") else min(p - s, m)), (name, s, held)


# --- 10. tensor parallelism vs one unsplit process -----------------------------------------------
def test_tp_fg_equals_one_process_and_logs_one_all_reduce_each_way():
    mod = FIG["tp_fg"]
    d = fig_data("tp_fg")
    w = d["weights"]
    x = w["x"].clone().requires_grad_()
    y = torch.nn.functional.silu(x @ w["w1"].T) @ w["w2"].T
    y.backward(w["dy"])
    for r in d["ranks"]:
        torch.testing.assert_close(r["y"], y.detach(), rtol=0, atol=1e-12)
        torch.testing.assert_close(r["dx"], x.grad, rtol=0, atol=1e-12)
    want = sorted((phase, r, "all_reduce", (mod.TOKENS, mod.HIDDEN)) for phase in ("forward", "backward")
                  for r in range(mod.WORLD))
    assert d["calls"] == want


# --- 11. ring all-reduce vs the sum and Patarasuk & Yuan's schedule --------------------------------
def test_ring_steps_against_the_sum_and_the_block_schedule():
    mod = FIG["ring_steps"]
    d = fig_data("ring_steps")
    n = d["world"]
    total = sum(mod._input(r) for r in range(n))
    for r in range(n):
        assert d["results"][r] == total.tolist()
    assert len(d["steps"]) == 2 * (n - 1)
    for k, row in enumerate(d["steps"]):
        for r, block, contributors, peer in row:
            assert peer == (r + 1) % n
            assert block == ((r - k - 1) % n if k < n - 1 else (r - (k - n + 1)) % n), (k, r)
            assert len(contributors) == (k + 1 if k < n - 1 else n), (k, r)
    assert (d["states"][-1] == n).all()


# --- 12. alpha-beta curves vs the closed forms ----------------------------------------------------
def test_alpha_beta_against_closed_forms():
    d = fig_data("alpha_beta")
    a, b = d["alpha_s"], 1 / d["bytes_per_s"]
    for n, w in d["worlds"].items():
        k = int(math.log2(n))  # powers of two: log2 n steps of recursive doubling
        for s, ring, rd in zip(d["sizes"], w["ring"], w["doubling"]):
            assert ring == pytest.approx(2 * (n - 1) * (a + s / n * b), rel=1e-12)
            assert rd == pytest.approx(k * (a + s * b), rel=1e-12)
        s_star = w["crossover"]
        assert 2 * (n - 1) * (a + s_star / n * b) == pytest.approx(k * (a + s_star * b), rel=1e-9)
    assert d["worlds"][4]["crossover"] == pytest.approx(8 * a / b, rel=1e-12)  # the note: 2.0 MB


# --- 13. quantization vs the grid's definition -----------------------------------------------------
def test_quant_outlier_against_the_grid():
    mod = FIG["quant_outlier"]
    d = fig_data("quant_outlier")
    x, w = (t.numpy() for t in mod.tensors())
    assert d["step"] == pytest.approx(np.abs(x).max() / 127, rel=1e-12)
    s = np.sqrt(np.abs(x).max(0)) / np.sqrt(np.abs(w).max(0))  # alpha = 0.5
    np.testing.assert_allclose(d["s"], s, rtol=1e-12)
    assert d["step_smoothed"] == pytest.approx(np.abs(x / s).max() / 127, rel=1e-12)
    err = d["channel_error"]["int8 per tensor"]
    normal = [c for c in range(mod.K) if c != mod.OUTLIER_CHANNEL]
    assert min(err[c] for c in normal) > 5 * err[mod.OUTLIER_CHANNEL]  # the caption's claim
    out = d["output_error"]
    assert out["SmoothQuant, then int8 per tensor"] < out["int8 per tensor"] / 2


# --- 14. speculative rounds vs the definitions -----------------------------------------------------
def test_spec_rounds_against_the_definitions():
    mod = FIG["spec_rounds"]
    d = fig_data("spec_rounds")
    p, q = (np.array(t.tolist()) for t in mod.pair())
    a = float(np.minimum(p, q).sum())
    assert d["alpha"] == pytest.approx(a, abs=1e-6)
    for g, pred in d["predicted"].items():
        assert pred == pytest.approx((1 - a ** (g + 1)) / (1 - a), rel=1e-6)
        # 400 rounds: standard error of the mean below 0.08 for g <= 6; 0.2 is > 2.5 of them
        assert abs(d["tokens_per_call"][g] - pred) < 0.2, g
    assert 0.5 * np.abs(np.array(d["first_token_freq"]) - p).sum() < 0.08  # total variation to p
    for r in d["shown"]:
        assert r["tokens"][: r["accepted"]] == r["drafts"][: r["accepted"]]
        assert len(r["tokens"]) == r["accepted"] + 1


# --- 15. traces vs intervals merged here and the raw JSON ------------------------------------------
def _union(intervals):
    out = []
    for s, e in sorted(intervals):
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return out


def test_trace_gap_against_merged_intervals():
    mod = FIG["trace_gap"]
    d = fig_data("trace_gap")
    merged = _union([(k, k + dur) for _, _, k, dur in mod.LAUNCHES])
    holes = [(a[1], b[0]) for a, b in itertools.pairwise(merged)]
    assert d["gaps"] == holes
    assert d["largest"] == max(holes, key=lambda h: h[1] - h[0])
    assert d["cause"][0] == "Scheduler.schedule"  # the only host range covering most of the gap
    assert d["breakdown"]["busy"] == sum(e - s for s, e in merged)


def test_trace_breakdown_against_the_raw_json():
    import gzip

    mod = FIG["trace_breakdown"]
    d = fig_data("trace_breakdown")
    for label, name in mod.TRACES.items():
        with gzip.open(mod.PROFILES / f"{name}.json.gz", "rt") as f:
            gpu = [e for e in json.load(f)["traceEvents"] if e.get("ph") == "X"
                   and e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
        merged = _union([(float(e["ts"]), float(e["ts"]) + float(e["dur"])) for e in gpu])
        assert d[label]["span"] == pytest.approx(merged[-1][1] - merged[0][0], rel=1e-9)
        assert d[label]["busy"] == pytest.approx(sum(e - s for s, e in merged), rel=1e-9)
        assert d[label]["kernels"] == len(gpu)
        assert sum(d[label]["shares"].values()) == pytest.approx(1.0, abs=1e-9)


# --- 16. architectures vs the configs and the stage notes' numbers --------------------------------
def test_arch_knobs_against_the_configs():
    mod = FIG["arch_knobs"]
    d = fig_data("arch_knobs")
    for name, stem in mod.CONFIGS.items():
        cfg = json.loads((mod.CONFIG_DIR / f"{stem}.json").read_text())
        if "kv_lora_rank" in cfg:
            per_layer = cfg["kv_lora_rank"] + cfg["qk_rope_head_dim"]
        else:
            head_dim = cfg.get("head_dim") or cfg["hidden_size"] // cfg["num_attention_heads"]
            per_layer = 2 * cfg.get("num_key_value_heads", cfg["num_attention_heads"]) * head_dim
        assert d[name]["kv_bytes"] == cfg["num_hidden_layers"] * per_layer * 2, name
    assert d["LLaMA-3-8B"]["params"] == 8_030_261_248  # course/stages/12-architectures.md
    assert (d["Mixtral 8x7B"]["params"], d["Mixtral 8x7B"]["active"]) == (46_702_792_704, 12_879_925_248)
    assert d["DeepSeek-V3"]["kv_bytes"] == 70_272 and d["DeepSeek-V3"]["attention"] == "MLA"


def test_mla_absorption_against_the_notes_numbers():
    d = fig_data("mla_absorption")
    i = d["contexts"].index(32768)
    assert d["naive"][i] == pytest.approx(6.7e13, rel=0.01)  # course/stages/12-architectures.md
    assert d["absorbed"][i] == pytest.approx(6.3e11, rel=0.01)
    assert d["key_bytes"] == 576 * 2
    assert d["per_key"]["absorbed"] == 128 * 2 * (576 + 512)  # course/stages/00-hardware.md: 278,528
    assert d["intensity"]["Llama-3-8B GQA (g = 4)"] == 4.0


# --- 17. backfill vs the schedules worked out by hand ----------------------------------------------
def test_backfill_matches_the_hand_worked_trace_a():
    d = fig_data("backfill")

    def spans(run):
        return {job: (start, end) for job, start, end, _ in run["segments"]}

    assert spans(d["strict FIFO"]) == {0: (0, 10), 1: (10, 15), 2: (15, 23), 3: (15, 21)}
    assert spans(d["EASY backfill"]) == {0: (0, 10), 1: (10, 15), 2: (2, 10), 3: (3, 9)}
    assert d["reservation"] == 10
    assert (d["strict FIFO"]["mean_wait"], d["EASY backfill"]["mean_wait"]) == (8.5, 2.25)


# --- 18. the engine's steps vs the scheduler's contract ---------------------------------------------
def test_engine_loop_steps():
    mod = FIG["engine_loop"]
    d = fig_data("engine_loop")
    block = mod.CONFIG["block_size"]
    fed: dict[int, list[tuple[int, int]]] = {}
    for step in d["steps"]:
        entries = step["entries"]
        assert sum(n for _, _, n, _, _ in entries) <= mod.CONFIG["max_num_batched_tokens"]
        kinds = [prefill for _, prefill, _, _, _ in entries]
        assert kinds == sorted(kinds), "decodes come first in a decode-first step"
        for seq, _, n, start, slots in entries:
            assert len(slots) == n
            fed.setdefault(seq, []).extend(zip(range(start, start + n), slots))
    for seq, pairs in fed.items():
        positions = [pos for pos, _ in pairs]
        assert positions == list(range(mod.PROMPT_LENS[seq] + mod.MAX_TOKENS - 1)), seq
        assert all(slot % block == pos % block for pos, slot in pairs), seq
        assert len({slot for _, slot in pairs}) == len(pairs), seq
    assert all(len(t) == mod.MAX_TOKENS for t in d["outputs"].values())


# --- 19. MIG packing vs the profiles' start rules ----------------------------------------------------
def test_mig_packing_layouts_are_valid_and_first_fit_loses_one():
    mod = FIG["mig_packing"]
    d = fig_data("mig_packing")
    starts = {"1g.18gb": range(7), "1g.35gb": (0, 2, 4, 6), "2g.35gb": (0, 2, 4), "4g.71gb": (0,)}  # the note's table
    for name in ("first fit", "optimal (pack_mig)"):
        run = d[name]
        assert sorted([i for i, _, _ in run["placements"]] + run["unplaced"]) == list(range(len(mod.REQUESTS)))
        for gpu in range(mod.GPUS):
            used = set()
            for i, g, start in run["placements"]:
                if g == gpu:
                    profile = mod.REQUESTS[i]
                    assert start in starts[profile], (name, profile, start)
                    cells = set(range(start, start + d["sizes"][profile]))
                    assert not cells & used and max(cells) < 8, (name, gpu)
                    used |= cells
    assert d["optimal (pack_mig)"]["unplaced"] == [] and d["first fit"]["unplaced"] == [3]


# --- 20. split-KV merge vs one softmax -------------------------------------------------------------
def test_split_kv_merge_equals_softmax_attention():
    mod = FIG["split_kv"]
    d = fig_data("split_kv")
    full = torch.softmax(d["k"] @ d["q"] / mod.HEAD_DIM**0.5, 0) @ d["v"]
    np.testing.assert_allclose(d["merged"], full.numpy(), rtol=0, atol=1e-12)
    assert d["splits"] == math.ceil(len(d["table"]) * mod.BLOCK_SIZE / mod.SPLIT_TOKENS)
    assert sum(d["weights"]) == pytest.approx(1.0, abs=1e-12)
    assert len(set(d["table"])) == len(d["table"]) == math.ceil(mod.CONTEXT / mod.BLOCK_SIZE)


# --- 21. DDP buckets vs torch's own bucketing ------------------------------------------------------
def test_ddp_overlap_buckets_equal_torch_ddp_bucketing():
    import torch.distributed as dist

    mod = FIG["ddp_overlap"]
    d = fig_data("ddp_overlap")
    numels = mod._numels()
    assert sum(numels) == 124_439_808  # GPT-2 small, tied output layer
    order = list(range(len(numels) - 1, -1, -1))
    tensors = [torch.empty(numels[i], device="meta") for i in order]
    buckets, _ = dist._compute_bucket_assignment_by_size(tensors, [mod.CAP_MIB * 2**20], [False] * len(order), order)
    assert d["buckets"] == len(buckets)
    mib = [sum(numels[i] * mod.BYTES for i in b) / 2**20 for b in buckets]
    assert [s["mib"] for s in d["spans"]] == pytest.approx(mib)
    assert all(a["start"] + a["dur"] <= b["start"] + 1e-12 for a, b in zip(d["spans"], d["spans"][1:]))


def test_zero_memory_against_the_zero_papers_formula():
    import math

    mod = FIG["zero_memory"]
    d = fig_data("zero_memory")
    psi = d["params"]
    assert psi == 8_030_261_248  # Llama-3-8B, course/stages/07-training-frameworks.md
    for dp in mod.DP_SIZES:
        shard = math.ceil(psi / dp)
        want = {0: (2 * psi, 2 * psi, 12 * psi), 1: (2 * psi, 2 * psi, 12 * shard),
                2: (2 * psi, 2 * shard, 12 * shard), 3: (2 * shard, 2 * shard, 12 * shard)}
        for stage, (w, g, o) in want.items():
            assert d["bars"][(dp, stage)] == {"weights": w, "gradients": g, "optimizer": o}, (dp, stage)



# --- s15. PPO's clipped surrogate and GRPO's per-token weights, from their closed forms ----------------
def test_ppo_clip_objective_is_the_closed_form_min():
    mod = FIG["ppo_clip"]
    d = fig_data("ppo_clip")
    for adv in (1.0, -1.0):
        for r, objective, slope in zip(mod.RATIOS, d[adv]["objective"], d[adv]["slope"]):
            clipped = min(max(r, 1 - mod.EPS), 1 + mod.EPS)
            assert objective == pytest.approx(min(r * adv, clipped * adv), abs=1e-6)
            flat = (adv > 0 and r > 1 + mod.EPS) or (adv < 0 and r < 1 - mod.EPS)
            assert slope == pytest.approx(0.0 if flat else adv, abs=1e-5), (adv, r)


def test_grpo_length_weights_are_a_over_each_denominator():
    mod = FIG["grpo_length_weights"]
    d = fig_data("grpo_length_weights")
    rewards = np.array(mod.REWARDS)
    adv = (rewards - rewards.mean()) / (rewards.std(ddof=1) + 1e-4)  # TRL: unbiased std + 1e-4
    np.testing.assert_allclose(d["advantages"], adv, rtol=1e-6)
    g, total = len(mod.LENGTHS), sum(mod.LENGTHS)
    denominators = {"grpo": [g * n for n in mod.LENGTHS], "bnpo": [total] * g, "dr_grpo": [g * mod.T] * g}
    for loss_type, dens in denominators.items():
        np.testing.assert_allclose(d["weights"][loss_type], [-a / n for a, n in zip(adv, dens)], rtol=1e-6)


def test_checkpoint_interval_minimum_is_young_dalys_closed_form():
    d = fig_data("checkpoint_interval")
    c, m, t = d["c_s"], d["mtbf_s"], d["t_step"]
    assert d["young_daly_steps"] == pytest.approx(math.sqrt(2 * c * m) / t)  # argmin of C/tau + tau/(2M)
    best = min(d["model"], key=lambda p: p["overhead"])
    assert best["steps"] == pytest.approx(d["young_daly_steps"], rel=0.05)
    for r in d["replays"]:  # a failure loses less than one interval; every failure restarts the job
        assert 0 <= r["lost_steps"] < d["failures"] * r["every"] and r["restarts"] == d["failures"]


def test_elastic_timeline_resumes_at_a_checkpoint_below_each_failure_and_finishes():
    d = fig_data("elastic_timeline")
    assert d["points"][-1][1] == d["steps"]
    assert len(d["fails"]) == len(d["relaunches"]) == d["restarts"]
    for (t_fail, at_fail), (t_back, resumed) in zip(d["fails"], d["relaunches"]):
        assert resumed % d["every"] == 0 and at_fail - d["every"] < resumed <= at_fail and t_back >= t_fail
    assert d["lost_steps"] == sum(f - r for (_, f), (_, r) in zip(d["fails"], d["relaunches"]))


# --- s09. RoPE scaling against transformers; the causal work of contiguous and zigzag shards --------------

def test_rope_scaling_curves_equal_transformers_rope_init_functions():
    from transformers import LlamaConfig
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    mod = FIG["rope_scaling"]
    d = fig_data("rope_scaling")
    plain = 1.0 / (mod.BASE ** (torch.arange(0, mod.DIM, 2, dtype=torch.int64).float() / mod.DIM))
    for name, params in mod.METHODS.items():
        params = dict(params)
        longest = mod.TRAIN if params["rope_type"] == "dynamic" else int(mod.FACTOR * mod.TRAIN) + 1
        if params["rope_type"] == "dynamic":
            params.pop("original_max_position_embeddings")
        config = LlamaConfig(hidden_size=2 * mod.DIM, num_attention_heads=2, head_dim=mod.DIM,
                             max_position_embeddings=longest, rope_parameters={**params, "rope_theta": mod.BASE})
        inv_freq, attention = ROPE_INIT_FUNCTIONS[params["rope_type"]](config, None, seq_len=int(mod.FACTOR * mod.TRAIN))
        np.testing.assert_allclose(d["ratio"][name], (inv_freq / plain).tolist(), rtol=1e-5, err_msg=name)
        assert d["attention_factor"][name] == pytest.approx(attention), name


def test_zigzag_balance_work_is_the_closed_form():
    mod = FIG["zigzag_balance"]
    d = fig_data("zigzag_balance")
    n, w = mod.LONG, mod.LONG_WORLD
    c = n // w  # contiguous rank r: queries r c .. (r + 1) c - 1, each seeing p + 1 keys
    assert d["work"]["contiguous"] == [c * r * c + c * (c + 1) // 2 for r in range(w)]
    assert d["work"]["zigzag"] == [n * (n + 1) // 2 // w] * w  # every rank the same share
    assert sorted(d["owner"]["zigzag"][: mod.SMALL // (2 * mod.SMALL_WORLD)]) == [0] * (mod.SMALL // (2 * mod.SMALL_WORLD))


# --- P4. the dispatch matrix recounted from the routing trace and the replica rule -----------------

def test_ep_dispatch_bytes_recounted_from_the_trace():
    mod = FIG["ep_dispatch"]
    d = fig_data("ep_dispatch")
    experts = mod.trace()
    for name, slots in d["slots"].items():
        per = len(slots[0])
        replicas = {e: [r * per + j for r, row in enumerate(slots) for j, x in enumerate(row) if x == e]
                    for e in range(mod.EXPERTS)}
        assert all(replicas[e] for e in range(mod.EXPERTS)) and all(len(row) == per for row in slots)
        want = [[0] * mod.WORLD for _ in range(mod.WORLD)]
        for s in range(mod.WORLD):
            for t, row in enumerate(experts[s].tolist()):
                for e in row:  # token t takes replica t mod n_e (the handout's rule)
                    want[s][replicas[e][t % len(replicas[e])] // per] += mod.ROW_BYTES
        assert d["matrix"][name] == want, name
        assert all(sum(r) == mod.TOKENS * mod.TOP_K * mod.ROW_BYTES for r in want)
    recv = {name: mod.received(m) for name, m in d["matrix"].items()}
    ratio = {name: max(v) / (sum(v) / len(v)) for name, v in recv.items()}
    assert ratio["EPLB"] < 1.05 < 1.3 < ratio["contiguous"], ratio


# --- s10. goodput and percentiles recomputed from the reference's run with numpy -------------------

def test_goodput_rate_recomputed_from_the_records():
    d = fig_data("goodput_rate")
    ttft_bound, tpot_bound = d["slo"]["ttft_s"], d["slo"]["tpot_s"]
    for row in d["rows"]:
        recs = [r for r in row["records"] if r[5]]
        ttft = [r[1] - r[0] for r in recs]
        tpot = [0.0 if r[3] < 2 else (r[2] - r[1]) / (r[3] - 1) for r in recs]
        duration = max(r[2] for r in row["records"]) - min(r[0] for r in row["records"])
        good = sum(t <= ttft_bound and p <= tpot_bound for t, p in zip(ttft, tpot))
        assert row["goodput"] == pytest.approx(good / duration)
        assert row["throughput"] == pytest.approx(len(recs) / duration)
        assert row["ttft_p99"] == pytest.approx(float(np.percentile(ttft, 99)))
        assert row["tpot_p50"] == pytest.approx(float(np.percentile(tpot, 50)))
        assert row["goodput"] <= row["throughput"] + 1e-12


def test_token_mask_counts_equal_regex_partial_matching():
    """The figure's allowed-token counts per prefix against the `regex` module's partial matching of
    the schema's pattern over the same token texts (an independent grammar engine)."""
    import regex
    from tokenizers import Tokenizer

    mod = FIG["token_mask"]
    d = fig_data("token_mask")
    tok = Tokenizer.from_file(str(mod.TOKENIZER))
    special = {t.content for t in tok.get_added_tokens_decoder().values()}
    texts = []
    for i in range(tok.get_vocab_size()):
        s = None if tok.id_to_token(i) in special else tok.decode([i], skip_special_tokens=False)
        texts.append(s if s and all(" " <= c <= "~" for c in s) else None)
    pattern = regex.compile(r'\{"name":"[ !#-\[\]-~]{0,12}","age":-?(?:0|[1-9][0-9]{0,8}),"captain":(?:true|false)\}')
    for i, n in enumerate(d["allowed"]):
        prefix = d["document"][:i]
        want = sum(1 for s in texts if s and pattern.fullmatch(prefix + s, partial=True)) + bool(pattern.fullmatch(prefix))
        assert n == want, (i, prefix, n, want)


# --- P5. placements against the closed-form capacity bound; attainment against the judge's oracle --

def test_pd_placement_within_the_capacity_bound_and_attainment_equals_the_oracle():
    """Every placement's goodput is at most min(N_P / prefill_s(mean prompt), N_D * B* / ((n - 1) tau))
    (the note's derivation; B* = (tau - a_d) / b_d capped by the batch limit), per_gpu = goodput /
    GPUs, all placements of <= NUM_GPUS GPUs ranked by per_gpu; and the plotted attainment at every
    rate equals that of solutions/p5_pd/hidden/placement_oracle.py (another algorithm) to 1e-12."""
    mod = FIG["pd_placement"]
    d = fig_data("pd_placement")
    m, slo = d["model"], d["slo"]
    prefill = m["prefill_base_s"] + m["prefill_per_token_s"] * d["mean_prompt"]
    batch = min(d["max_decode_batch"], (slo["tpot_s"] - m["decode_base_s"]) / m["decode_per_seq_s"])
    step = m["decode_base_s"] + m["decode_per_seq_s"] * batch
    mu_p, mu_d = 1 / prefill, batch / ((d["mean_output"] - 1) * step)
    got = {(r["num_prefill"], r["num_decode"]) for r in d["ranked"]}
    assert got == {(p, q) for p in range(1, mod.NUM_GPUS) for q in range(1, mod.NUM_GPUS) if p + q <= mod.NUM_GPUS}
    for r in d["ranked"]:
        p, q = r["num_prefill"], r["num_decode"]
        assert r["per_gpu"] == pytest.approx(r["goodput"] / (p + q))
        assert 0 < r["goodput"] <= min(p * mu_p, q * mu_d), (p, q, r["goodput"], p * mu_p, q * mu_d)
    assert [r["per_gpu"] for r in d["ranked"]] == sorted((r["per_gpu"] for r in d["ranked"]), reverse=True)
    spec = importlib.util.spec_from_file_location(
        "placement_oracle", Path(mod.__file__).resolve().parents[2] / "solutions/p5_pd/hidden/placement_oracle.py")
    oracle = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(oracle)
    reqs = [(r.arrival_s, r.prompt_len, r.output_len) for r in mod.trace()]
    for c in d["curves"]:
        for rate, att in list(zip(d["rates"], c["attainment"]))[::8]:  # every 8th rate: the oracle is slow
            at = oracle.at_rate(reqs, rate)
            rows = oracle.run(at, c["num_prefill"], c["num_decode"], m, d["max_decode_batch"])
            assert att == pytest.approx(oracle.attainment(at, rows, (slo["ttft_s"], slo["tpot_s"])), abs=1e-12), (c, rate)
