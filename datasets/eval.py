"""Measure the course models on the eval slice: perplexity, draft acceptance rate, samples.

    python datasets/eval.py [--models datasets/models] [--out datasets/eval_results.json]
                            [--max-tokens N] [--device cpu|cuda]

Perplexity: exp of the mean next-token cross-entropy over the eval slice, cut into consecutive
windows of 1024 predicted tokens (each window starts cold: no context carried across windows).

Acceptance rate alpha of the draft q against the target p, at temperature T: under the standard
speculative-sampling rule a drafted token x ~ q is kept with probability min(1, p(x)/q(x)), so
the expected acceptance at one position is sum_x q(x) min(1, p(x)/q(x)) = sum_x min(p(x), q(x)).
At T = 0 both distributions are one-hot on their argmax and alpha is the rate at which the two
argmaxes agree. alpha is averaged over every position of the eval slice (teacher forcing on real
text); with gamma drafted tokens per step the expected tokens per target call is
(1 - alpha^(gamma+1)) / (1 - alpha).
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

HERE = Path(__file__).resolve().parent
PROMPTS = ("It is a truth universally acknowledged,", "Fellow citizens of the Senate and House",
           "Call me Ishmael.", "ROMEO.\n")


def load(path: Path, device: torch.device):
    from transformers import LlamaForCausalLM

    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    return LlamaForCausalLM.from_pretrained(str(path), dtype=dtype).to(device).eval()


def windows(ids: torch.Tensor, size: int = 1024) -> list[torch.Tensor]:
    """Consecutive windows of size+1 tokens overlapping by one (every token predicted once)."""
    return [ids[s:s + size + 1] for s in range(0, len(ids) - 1, size)]


@torch.no_grad()
def logits_of(model, window: torch.Tensor) -> torch.Tensor:  # (T, V) float32
    return model(input_ids=window[None, :-1]).logits[0].float()


@torch.no_grad()
def perplexity(model, ids: torch.Tensor) -> float:
    nll, count = 0.0, 0
    for w in windows(ids):
        nll += F.cross_entropy(logits_of(model, w), w[1:], reduction="sum").item()
        count += len(w) - 1
    return math.exp(nll / count)


def alpha_per_position(p_logits: torch.Tensor, q_logits: torch.Tensor, temperature: float):
    """Expected acceptance of a token drafted from q and verified against p, per row. (T,)"""
    if temperature == 0:
        return (p_logits.argmax(-1) == q_logits.argmax(-1)).float()
    p = torch.softmax(p_logits / temperature, dim=-1)
    q = torch.softmax(q_logits / temperature, dim=-1)
    return torch.minimum(p, q).sum(-1)


@torch.no_grad()
def acceptance(target, draft, ids: torch.Tensor, temperatures=(0.0, 1.0)) -> dict[float, float]:
    sums = {t: 0.0 for t in temperatures}
    count = 0
    for w in windows(ids):
        p, q = logits_of(target, w), logits_of(draft, w)
        for t in temperatures:
            sums[t] += alpha_per_position(p, q, t).sum().item()
        count += len(w) - 1
    return {t: s / count for t, s in sums.items()}


def expected_tokens(alpha: float, gamma: int) -> float:
    return (1 - alpha ** (gamma + 1)) / (1 - alpha) if alpha < 1 else gamma + 1.0


@torch.no_grad()
def samples(model, tokenizer, device, new_tokens: int = 48) -> list[dict]:
    out = []
    for i, prompt in enumerate(PROMPTS):
        ids = tokenizer(prompt, return_tensors="pt")["input_ids"].to(device)
        for temperature in (0.0, 1.0):
            torch.manual_seed(i)
            gen = model.generate(ids, max_new_tokens=new_tokens, do_sample=temperature > 0,
                                 temperature=temperature if temperature > 0 else None,
                                 top_k=0 if temperature > 0 else None, top_p=None)
            text = tokenizer.decode(gen[0, ids.shape[1]:], skip_special_tokens=False)
            out.append({"prompt": prompt, "temperature": temperature, "completion": text})
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", type=Path, default=HERE / "models")
    parser.add_argument("--out", type=Path, default=HERE / "eval_results.json")
    parser.add_argument("--max-tokens", type=int, default=0, help="use only the first N eval tokens")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--no-samples", action="store_true")
    args = parser.parse_args()
    from transformers import AutoTokenizer

    device = torch.device(args.device)
    target_dir, draft_dir = args.models / "course-llama", args.models / "course-llama-draft"
    tokenizer = AutoTokenizer.from_pretrained(str(target_dir))
    text = (HERE / "eval" / "eval.txt").read_text(encoding="utf-8")
    ids = torch.tensor(np.asarray(tokenizer(text, verbose=False)["input_ids"]), device=device)
    if args.max_tokens:
        ids = ids[: args.max_tokens]
    target, draft = load(target_dir, device), load(draft_dir, device)
    alpha = acceptance(target, draft, ids)
    result = {
        "eval_tokens": len(ids), "device": torch.cuda.get_device_name(device)
        if device.type == "cuda" else "cpu", "dtype": str(next(target.parameters()).dtype),
        "models": {name: {"parameters": sum(p.numel() for p in m.parameters()),
                          "eval_perplexity": round(perplexity(m, ids), 3)}
                   for name, m in (("course-llama", target), ("course-llama-draft", draft))},
        "acceptance": {"T0": round(alpha[0.0], 4), "T1": round(alpha[1.0], 4)},
        "expected_tokens_per_target_call_gamma4": {
            "T0": round(expected_tokens(alpha[0.0], 4), 3),
            "T1": round(expected_tokens(alpha[1.0], 4), 3)},
    }
    if not args.no_samples:
        result["samples"] = {"course-llama": samples(target, tokenizer, device),
                             "course-llama-draft": samples(draft, tokenizer, device)}
    args.out.write_text(json.dumps(result, indent=2, ensure_ascii=False) + "\n")
    print(json.dumps({k: v for k, v in result.items() if k != "samples"}, indent=2))


if __name__ == "__main__":
    main()
