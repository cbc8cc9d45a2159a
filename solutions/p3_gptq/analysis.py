"""The numbers of README "Analysis": GPTQ against RTN on two linears of the course model's layer 0.

    python analysis.py           prints the lines of answers/gptq_numbers.toml from YOUR gptq package

Calibration: 8 x 256 tokens of datasets/eval from token 120,000 (as the course-model figures), run
through transformers' LLaMA (fp32) up to layer 0's down_proj; X is each linear's input (T = 2048, K).
For each linear: w4, group 128, symmetric, damp 1%: RTN (`rtn`), GPTQ without and with act-order
(`GPTQ.quantize`), each scored by the relative output error ||X (W - Q)^T||_F / ||X W^T||_F in
float64, and diag_spread = max(diag H) / median(diag H) of the H your `add_batch` accumulated.
The grader calls `layer_inputs` and `numbers` of its own copy of this file on your package.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import torch
from gptq import GPTQ, QuantConfig, rtn
from torch import Tensor

CALIB_ROWS, CALIB_LEN, CALIB_AT = 8, 256, 120_000
LINEARS = {"q_proj": "self_attn.q_proj", "down_proj": "mlp.down_proj"}  # layer 0's, by short name


class _Captured(Exception):
    """Raised by the last hook: the rest of the model is not needed."""


def layer_inputs(folder: Path) -> dict[str, tuple[Tensor, Tensor]]:
    """{short name: (X (T, K) float32, W (N, K) float32)} of layer 0's linears in LINEARS, the course
    model in `folder` (datasets/models/course-llama) fed the calibration rows one by one."""
    from tokenizers import Tokenizer
    from transformers import LlamaForCausalLM

    model = LlamaForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    text = (folder.parents[1] / "eval" / "eval.txt").read_text()
    ids = torch.tensor(Tokenizer.from_file(str(folder / "tokenizer.json")).encode(text[:700_000]).ids)
    rows = ids[CALIB_AT : CALIB_AT + CALIB_ROWS * CALIB_LEN].view(CALIB_ROWS, CALIB_LEN)
    layer = model.model.layers[0]
    xs: dict[str, list[Tensor]] = {name: [] for name in LINEARS}

    def hook(name: str, last: bool):
        def grab(module, args, out):
            xs[name].append(args[0][0].detach().clone())  # (T_row, K)
            if last:
                raise _Captured
        return grab

    hooks = [layer.get_submodule(path).register_forward_hook(hook(name, i == len(LINEARS) - 1))
             for i, (name, path) in enumerate(LINEARS.items())]
    try:
        with torch.no_grad():
            for row in rows:
                try:
                    model(row[None])
                except _Captured:
                    pass
    finally:
        for h in hooks:
            h.remove()
    return {name: (torch.cat(xs[name]), layer.get_submodule(path).weight.detach().float().clone())
            for name, path in LINEARS.items()}


def relative_error(x: Tensor, w: Tensor, q: Tensor) -> float:
    """||X (W - Q)^T||_F / ||X W^T||_F in float64: the layer's output error relative to its output."""
    x, w, q = x.double(), w.double(), q.double()
    return float(torch.linalg.matrix_norm(x @ (w - q).T) / torch.linalg.matrix_norm(x @ w.T))


def numbers(inputs: dict[str, tuple[Tensor, Tensor]]) -> dict[str, float]:
    """The answers' keys -> values, from the package's rtn, GPTQ and add_batch on `inputs`."""
    out = {}
    for name, (x, w) in inputs.items():
        g = GPTQ(x.shape[1])
        g.add_batch(x)
        diag = torch.diagonal(g.H)
        out[f"rtn_error_{name}"] = relative_error(x, w, rtn(w, QuantConfig(4, 128)).weight)
        out[f"gptq_error_{name}"] = relative_error(x, w, g.quantize(w, QuantConfig(4, 128)).weight)
        out[f"act_order_error_{name}"] = relative_error(x, w, g.quantize(w, QuantConfig(4, 128, desc_act=True)).weight)
        out[f"diag_spread_{name}"] = float(diag.max() / diag.median())
    return out


def main() -> int:
    folder = Path(__file__).resolve().parents[2] / "datasets" / "models" / "course-llama"
    if not (folder / "model.safetensors").is_file():
        print(f"{folder} is not built (make datasets)", file=sys.stderr)
        return 1
    for key, value in numbers(layer_inputs(folder)).items():
        print(f"{key} = {value:.5g}" if math.isfinite(value) else f"{key} = nan")
    return 0


if __name__ == "__main__":
    sys.exit(main())
