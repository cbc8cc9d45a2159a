"""Shared fixtures for p3_gptq: independent oracles written from the handout's definitions.

- the v1 layout, packed here word by word with Python ints and unpacked with plain shifts;
- GPTQ's grid (qparams) group by group, and GPTQ as the naive column-by-column OBS procedure in
  float64: no Cholesky, no lazy batches, H^-1 shrunk by a Schur complement after each column;
- the course LLaMA's forward pass by transformers itself (LlamaForCausalLM on the same weights, the
  quantized linears swapped in per call), whose hooks also hand back every linear's calibration inputs.
Nothing here is copied from the reference's output. Triton kernels run in its CPU interpreter when
there is no GPU; TRITON_INTERPRET must be set before triton is first imported, hence here.
"""

from __future__ import annotations  # noqa: I001 (the grader's imports first, then torch)

import functools
import math
import os
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from autograder.testing import course_model_dir, oracle, tolerances

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")
torch.set_num_threads(1)  # small tensors: one thread is fast enough and immune to a busy machine


# ---- GPTQ's grid and the naive OBS procedure -----------------------------------------------------

def grid_oracle(w: torch.Tensor, bits: int, sym: bool):
    """(scale, zero) of each row of w (rows, cols), by the handout's formulas (zero as a float)."""
    qmax = 2**bits - 1
    lo, hi = w.amin(dim=1).clamp(max=0), w.amax(dim=1).clamp(min=0)
    empty = (lo == 0) & (hi == 0)  # an all-zero row: the range [-1, 1]
    lo, hi = lo.masked_fill(empty, -1.0), hi.masked_fill(empty, 1.0)
    if sym:
        amax = torch.maximum(lo.abs(), hi)
        return amax * 2 / qmax, torch.full_like(amax, float(2 ** (bits - 1)))
    scale = (hi - lo) / qmax
    return scale, torch.round(-lo / scale)


def rtn_oracle(w: torch.Tensor, config) -> torch.Tensor:
    """Round-to-nearest of w (N, K) group by group (config.group_size, -1: the whole row), dequantized."""
    g = w.shape[1] if config.group_size == -1 else config.group_size
    out = torch.empty_like(w)
    for c in range(0, w.shape[1], g):
        scale, zero = grid_oracle(w[:, c : c + g], config.bits, config.sym)
        codes = torch.clamp(torch.round(w[:, c : c + g] / scale[:, None]) + zero[:, None], 0, 2**config.bits - 1)
        out[:, c : c + g] = scale[:, None] * (codes - zero[:, None])
    return out


def naive_gptq(w: torch.Tensor, h: torch.Tensor, bits: int, group_size: int, sym: bool = True,
               damp: float = 0.01, act_order: bool = False, follow: torch.Tensor | None = None):
    """Optimal Brain Surgeon one column at a time, float64: quantize column i, move every later
    column j by -err_i * Hinv[i, j] / Hinv[i, i], then eliminate i from Hinv by its Schur complement.
    Returns (codes (N, K), dequantized W (N, K), g_idx (K,)) in the original column order.

    follow: codes (N, K) to follow at rounding ties. Where w / scale lies within 1e-9 of a half
    (a symmetric group's most negative weight sits at exactly -7.5 steps), float64 noise tips the
    rounding either way and the row's later columns move with it; both codes are right, so where
    `follow` holds one of the two, the oracle takes it and compares the rest of the row on that path."""
    w, h = w.double().clone(), h.double().clone()
    n, k = w.shape
    dead = torch.diag(h) == 0
    h[dead, dead] = 1.0
    w[:, dead] = 0.0
    order = torch.argsort(torch.diag(h), descending=True) if act_order else torch.arange(k)
    w, h = w[:, order], h[order][:, order]
    follow = follow[:, order].double() if follow is not None else None
    h = h + damp * torch.diag(h).mean() * torch.eye(k, dtype=h.dtype)
    with oracle():
        hinv = torch.linalg.inv(h)
    g = k if group_size == -1 else group_size
    codes, deq = torch.zeros(n, k, dtype=torch.float64), torch.zeros(n, k, dtype=torch.float64)
    for i in range(k):
        if i % g == 0:
            scale, zero = grid_oracle(w[:, i : i + g] if group_size != -1 else w, bits, sym)
        steps = w[:, i] / scale
        codes[:, i] = torch.clamp(torch.round(steps) + zero, 0, 2**bits - 1)
        if follow is not None:
            tie = (steps - steps.floor() - 0.5).abs() < 1e-9
            either = (follow[:, i] == torch.clamp(steps.floor() + zero, 0, 2**bits - 1)) | (
                follow[:, i] == torch.clamp(steps.floor() + 1 + zero, 0, 2**bits - 1))
            codes[:, i] = torch.where(tie & either, follow[:, i], codes[:, i])
        deq[:, i] = scale * (codes[:, i] - zero)
        err = (w[:, i] - deq[:, i]) / hinv[i, i]
        w[:, i + 1 :] -= err[:, None] * hinv[i, i + 1 :][None, :]
        hinv = hinv - hinv[:, i : i + 1] * hinv[i : i + 1, :] / hinv[i, i]  # row/column i become 0
    inv = torch.argsort(order)
    g_idx = (torch.arange(k) // g)[inv]
    return codes[:, inv], deq[:, inv], g_idx


def hessian_oracle(x: torch.Tensor) -> torch.Tensor:
    """2 X^T X / n over all rows of x (..., K), in float64."""
    x = x.reshape(-1, x.shape[-1]).double()
    with oracle():
        return 2 * x.T @ x / x.shape[0]


def output_mse(x: torch.Tensor, w: torch.Tensor, q: torch.Tensor, gram: torch.Tensor | None = None) -> float:
    """mean((X W^T - X Q^T)^2) over the rows of x (T, K) and N outputs, in float64, computed as
    sum((D X^T X) * D) / (T N) with D = W - Q; gram = X^T X (float64) when already at hand."""
    d = w.double() - q.double()
    with oracle():
        gram = x.double().T @ x.double() if gram is None else gram
        return float(((d @ gram) * d).sum() / (x.shape[0] * d.shape[0]))


# ---- the v1 layout --------------------------------------------------------------------------------

def pack_words(codes: torch.Tensor) -> torch.Tensor:
    """(R, C) codes in [0, 16) -> int32 (R/8, C), word (j, c) = sum_t codes[8j+t, c] << 4t."""
    r, c = codes.shape
    out = torch.zeros(r // 8, c, dtype=torch.int64)
    for t in range(8):
        out |= codes[t::8].long() << (4 * t)
    return (out - (out >= 2**31).long() * 2**32).to(torch.int32)


def make_v1(q: torch.Tensor, scales: torch.Tensor, zeros: torch.Tensor, g_idx: torch.Tensor) -> dict:
    """codes q (N, K), scales (G, N) fp16, true zeros (G, N) in [1, 16], g_idx (K,) -> v1 tensors."""
    return {"qweight": pack_words(q.T), "qzeros": pack_words((zeros - 1).T).T.contiguous(),
            "scales": scales.contiguous(), "g_idx": g_idx.to(torch.int32)}


def dequant_v1_oracle(qweight, qzeros, scales, g_idx) -> torch.Tensor:
    """The v1 tensors -> W (N, K) float32: W[n, k] = scales[g, n] * (code[k, n] - (stored[g, n] + 1))."""
    qweight, qzeros, scales, g_idx = (t.cpu() for t in (qweight, qzeros, scales, g_idx))
    codes = torch.stack([(qweight >> (4 * t)) & 0xF for t in range(8)], dim=1).reshape(-1, qweight.shape[1])
    zeros = torch.stack([(qzeros >> (4 * t)) & 0xF for t in range(8)], dim=2).reshape(qzeros.shape[0], -1) + 1
    gi = g_idx.long()
    return (scales.float()[gi] * (codes - zeros[gi]).float()).T.contiguous()


def random_v1(k: int, n: int, group_size: int, act_order: bool, seed: int) -> tuple[dict, torch.Tensor]:
    """Random v1 tensors (K, N given) and W (N, K) float32 computed from the raw integers."""
    gen = torch.Generator().manual_seed(seed)
    groups = -(-k // group_size)
    q = torch.randint(0, 16, (n, k), generator=gen)
    zeros = torch.randint(1, 17, (groups, n), generator=gen)  # 16 stores 15: the top nibble
    scales = (torch.rand(groups, n, generator=gen) * 0.02 + 0.002).half()
    g_idx = torch.arange(k) // group_size
    if act_order:
        g_idx = g_idx[torch.randperm(k, generator=gen)]
    w = (scales.float()[g_idx] * (q.T - zeros[g_idx]).float()).T.contiguous()
    return make_v1(q, scales, zeros, g_idx), w


# ---- a GPTQ folder of the course model for the engine ------------------------------------------------

def rtn_v1(w: torch.Tensor, g_idx: torch.Tensor) -> dict:
    """Symmetric 4-bit RTN of w (N, K) over the groups g_idx gives (any order), packed by make_v1:
    each group's scale (fp16) and zero 8 from grid_oracle, codes by the handout's rounding."""
    w = w.float()
    groups = int(g_idx.max()) + 1
    codes = torch.zeros(w.shape, dtype=torch.int64)
    scales = torch.zeros(groups, w.shape[0], dtype=torch.float16)
    zeros = torch.zeros(groups, w.shape[0], dtype=torch.int64)
    for j in range(groups):
        cols = (g_idx == j).nonzero()[:, 0]
        scale, zero = grid_oracle(w[:, cols], 4, True)
        scales[j], zeros[j] = scale.half(), zero.long()
        codes[:, cols] = torch.clamp(torch.round(w[:, cols] / scales[j].float()[:, None]) + zero[:, None], 0, 15).long()
    return make_v1(codes, scales, zeros, g_idx)


def write_gptq_llama(out: Path, src: Path, act_order: bool = False, drop: tuple[str, ...] = ()) -> dict:
    """A GPTQ folder of the HF LLaMA in src: every decoder linear as v1 tensors (rtn_v1, group 128;
    act_order: groups of columns by descending norm, as act-order groups them by importance), the other weights and the
    tokenizer copied, quantization_config added; linears named in `drop` are left out. Returns the
    dequantized weights {name + ".weight": W (N, K) float32} for the oracle model."""
    import json
    import shutil

    from safetensors.torch import load_file, save_file

    out.mkdir(parents=True, exist_ok=True)
    tensors, deq = {}, {}
    for i, (name, w) in enumerate(sorted(load_file(str(src / "model.safetensors")).items())):
        base = name.removesuffix(".weight")
        if not name.endswith("_proj.weight"):
            tensors[name] = w
        elif base not in drop:
            g_idx = torch.arange(w.shape[1]) // 128
            if act_order:  # as act-order groups: by a column importance (here its norm), not its position
                g_idx = g_idx[torch.argsort(torch.argsort(w.float().norm(dim=0), descending=True))]
            v1 = rtn_v1(w, g_idx)
            tensors.update({f"{base}.{key}": t for key, t in v1.items()})
            deq[name] = dequant_v1_oracle(v1["qweight"], v1["qzeros"], v1["scales"], v1["g_idx"])
    save_file(tensors, str(out / "model.safetensors"))
    cfg = json.loads((src / "config.json").read_text())
    cfg["quantization_config"] = {"quant_method": "gptq", "bits": 4, "group_size": 128, "desc_act": act_order,
                                  "sym": True, "checkpoint_format": "gptq"}
    (out / "config.json").write_text(json.dumps(cfg, indent=2))
    for extra in ("tokenizer.json", "tokenizer_config.json"):
        if (src / extra).is_file():
            shutil.copy(src / extra, out / extra)
    return deq


def greedy_gaps(logits: torch.Tensor, prompt_len: int, tokens: list[int]) -> list[float]:
    """For each generated token: the oracle's max logit minus the token's logit, where logits (T, V)
    are the oracle's, teacher-forced on the prompt and the tokens (0: the oracle's own greedy pick)."""
    return [float(logits[prompt_len - 1 + i].max() - logits[prompt_len - 1 + i, t]) for i, t in enumerate(tokens)]


@pytest.fixture(scope="session")
def oracles() -> SimpleNamespace:
    return SimpleNamespace(grid=grid_oracle, rtn=rtn_oracle, gptq=naive_gptq, hessian=hessian_oracle, mse=output_mse,
                           pack_words=pack_words, make_v1=make_v1, dequant=dequant_v1_oracle, random_v1=random_v1,
                           gptq_llama=write_gptq_llama, greedy_gaps=greedy_gaps)


_TOLERANCES = tolerances(Path(__file__).parent)


@pytest.fixture(scope="session")
def tol():
    """tol(name) -> {"rtol": r, "atol": a}: the tolerance `name` of assignment.toml's [tolerances]."""
    return _TOLERANCES


@pytest.fixture
def device() -> str:
    """Where kernels run: the GPU when there is one, else Triton's CPU interpreter."""
    return "cuda" if torch.cuda.is_available() else "cpu"


# ---- the course LLaMA -----------------------------------------------------------------------------

LINEARS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
INPUT_OF = {"q_proj": "attn_in", "k_proj": "attn_in", "v_proj": "attn_in", "o_proj": "o_in",
            "gate_proj": "mlp_in", "up_proj": "mlp_in", "down_proj": "down_in"}


def _swap(model, weights: dict) -> dict:
    """Put weights (linear name -> (N, K)) into the model's linears; returns what they replaced."""
    old = {}
    for name, w in weights.items():
        module = model.get_submodule(name)
        old[name], module.weight.data = module.weight.data, w.to(module.weight.dtype)
    return old


def hf_forward(model, sd: dict, ids: torch.Tensor, weights: dict | None = None, capture: dict | None = None):
    """Logits (T, V) of one sequence ids (T,) by transformers' own LLaMA (the oracle forward), with
    linears overridden by `weights` ("model.layers.{i}.self_attn.q_proj" -> W) for this call only;
    capture collects each linear's input (T, K) by (layer, input name)."""
    hooks = []
    if capture is not None:
        for i, layer in enumerate(model.model.layers):
            for key, module in (("attn_in", layer.self_attn.q_proj), ("o_in", layer.self_attn.o_proj),
                                ("mlp_in", layer.mlp.gate_proj), ("down_in", layer.mlp.down_proj)):
                hooks.append(module.register_forward_hook(
                    lambda m, args, out, key=(i, key): capture.setdefault(key, []).append(args[0][0].detach())))
    replaced = _swap(model, weights or {})
    try:
        return model(ids[None]).logits[0]
    finally:
        for hook in hooks:
            hook.remove()
        _swap(model, replaced)


def hf_perplexity(model, sd: dict, rows: torch.Tensor, weights: dict | None = None) -> float:
    """exp(mean next-token negative log-likelihood) over the rows (B, T) of token ids."""
    nll, count = 0.0, 0
    for row in rows:
        logits = hf_forward(model, sd, row, weights)[:-1].double()
        nll += float(torch.nn.functional.cross_entropy(logits, row[1:], reduction="sum"))
        count += len(row) - 1
    return math.exp(nll / count)


@pytest.fixture(scope="session")
def course_model() -> SimpleNamespace:
    """The course LLaMA in transformers (float32; its weights as sd) and token ids of the eval text;
    not graded where it is absent."""
    folder = course_model_dir()
    eval_txt = folder.parents[1] / "eval" / "eval.txt" if folder else None
    if folder is None or not eval_txt.is_file():
        pytest.skip("datasets/models/course-llama or datasets/eval is not built")
    import json

    from tokenizers import Tokenizer
    from transformers import LlamaForCausalLM

    model = LlamaForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    sd = {name: t.detach().clone() for name, t in model.state_dict().items()}
    sd["__config__"] = json.loads((folder / "config.json").read_text())
    text = eval_txt.read_text()
    ids = torch.tensor(Tokenizer.from_file(str(folder / "tokenizer.json")).encode(text[:700_000]).ids)
    return SimpleNamespace(sd=sd, ids=ids, folder=folder, forward=functools.partial(hf_forward, model),
                           perplexity=functools.partial(hf_perplexity, model), linears=LINEARS, input_of=INPUT_OF)
