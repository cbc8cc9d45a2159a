"""GPTQ on the course LLaMA (fp32): per-linear error against RTN and perplexity, a small fast setting.

Calibration: 16 x 256 tokens of datasets/eval from token 120,000 (disjoint from the eval slice), the
FP model's inputs to every linear (not sequential). Eval: the first EVAL_ROWS x EVAL_LEN tokens.
RTN is the test's own oracle; GPTQ is the package's, symmetric, g128, damp 1%, no act-order.
"""

import pytest
import torch
from gptq import GPTQ, QuantConfig

pytestmark = pytest.mark.kernels()  # torch code, no Triton kernel
CALIB_ROWS, CALIB_LEN, CALIB_AT = 16, 256, 120_000
EVAL_ROWS, EVAL_LEN = 4, 1024


def linear_name(layer: int, lin: str) -> str:
    return f"model.layers.{layer}.{'self_attn' if lin in ('q_proj', 'k_proj', 'v_proj', 'o_proj') else 'mlp'}.{lin}"


@pytest.fixture(scope="module")
def run(course_model, oracles):
    """FP perplexity, and for bits 4 and 3: GPTQ and RTN weights, per-linear MSE ratios, perplexities."""
    cm = course_model
    calib = cm.ids[CALIB_AT : CALIB_AT + CALIB_ROWS * CALIB_LEN].view(CALIB_ROWS, CALIB_LEN)
    evals = cm.ids[: EVAL_ROWS * EVAL_LEN].view(EVAL_ROWS, EVAL_LEN)
    captured: dict = {}
    with torch.no_grad():
        for row in calib:
            cm.forward(cm.sd, row, capture=captured)
        out = {"fp": cm.perplexity(cm.sd, evals)}
    xs = {key: torch.cat(v) for key, v in captured.items()}  # (layer, input) -> (T, K)
    grams = {key: x.double().T @ x.double() for key, x in xs.items()}
    for bits in (4, 3):
        cfg = QuantConfig(bits, 128)
        wg, wr, ratios = {}, {}, []
        for layer in range(cm.sd["__config__"]["num_hidden_layers"]):
            quantizers = {}
            for lin in cm.linears:
                key = (layer, cm.input_of[lin])
                if key not in quantizers:  # q, k, v (and gate, up) share their input and H
                    quantizers[key] = GPTQ(xs[key].shape[1])
                    quantizers[key].add_batch(xs[key])
                name, w = linear_name(layer, lin), cm.sd[linear_name(layer, lin) + ".weight"]
                wg[name], wr[name] = quantizers[key].quantize(w, cfg).weight.float(), oracles.rtn(w, cfg)
                x = xs[key]
                ratios.append(oracles.mse(x, w, wg[name], grams[key]) / oracles.mse(x, w, wr[name], grams[key]))
        with torch.no_grad():
            out[bits] = {"gptq": cm.perplexity(cm.sd, evals, wg), "ratios": sorted(ratios),
                         "rtn": cm.perplexity(cm.sd, evals, wr) if bits == 3 else None}  # w4 RTN: not gated
    return out


@pytest.mark.points(3)
def test_gptq_cuts_every_linears_output_error_against_rtn(run):
    r = run[4]["ratios"]
    median, worst = r[len(r) // 2], r[-1]
    print(f"MSE(GPTQ) / MSE(RTN), w4 g128, 35 linears: median {median:.3f}, max {worst:.3f}")
    # Measured on this setting: median 0.44, max 0.60 (on calibration 128 x 256: 0.52 and 0.76).
    assert median <= 0.6 and worst <= 0.85


def assert_gptq_weights(run, bits: int) -> None:
    """Perplexity alone cannot tell GPTQ from rounding: measured on CPU, w4 g128 RTN is 1.027x FP (under
    the 3 % bar) and RTN with a per-group clip search 1.019x (GPTQ: 1.023x); at 3 bits clip-searched
    RTN even beats GPTQ (25.99 vs 26.25). The per-linear output error tells them apart by far: its
    median ratio to RTN's is 0.44 (w4) / 0.46 (w3) for GPTQ, 1.0 for RTN, 0.85 / 0.73 with a clip
    search (max 1.20 / 1.25). A perplexity gate counts only where that ratio shows GPTQ's weights."""
    r = run[bits]["ratios"]
    median, worst = r[len(r) // 2], r[-1]
    assert median <= 0.6 and worst <= 0.85, (
        f"w{bits}: MSE(yours) / MSE(RTN) per linear, median {median:.3f} (bar 0.6), max {worst:.3f} (bar 0.85): "
        "these weights do not reduce the output error the way GPTQ's error compensation does, so their "
        "perplexity is not credited")


@pytest.mark.points(3)
def test_w4_g128_gptq_perplexity_within_3_percent_of_fp(run):
    ratio = run[4]["gptq"] / run["fp"]
    print(f"FP {run['fp']:.2f}, w4 g128 GPTQ {run[4]['gptq']:.2f} ({ratio:.4f}x)")
    assert_gptq_weights(run, 4)
    assert ratio <= 1.03


@pytest.mark.points(2)
def test_3_bit_gptq_perplexity_beats_rtn(run):
    print(f"w3 g128: GPTQ {run[3]['gptq']:.2f}, RTN {run[3]['rtn']:.2f}")
    assert_gptq_weights(run, 3)
    # Measured on CPU: GPTQ 26.25, RTN 26.62 (0.986x). The bar, 0.995x, leaves GPTQ 0.9 % and
    # rounds RTN itself (1.0x) out by 0.5 %; the ratio gate above is what keeps any rounding out.
    assert run[3]["gptq"] <= 0.995 * run[3]["rtn"], (
        f"w3 perplexity {run[3]['gptq']:.2f} is {run[3]['gptq'] / run[3]['rtn']:.4f}x RTN's; expected at most 0.995x")
