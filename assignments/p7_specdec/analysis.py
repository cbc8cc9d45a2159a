"""The analysis run (README, section "Analysis"): is speculation worth it, and when would it be?

    python analysis.py          # every number answers/speculation_numbers.toml asks for

On the course pair (CPU, float32, greedy): your `speculative_generate` continues the first
PROMPT_LEN tokens of the eval text by MAX_NEW tokens at GAMMA; your `measure_acceptance` reads alpha
off that same sequence (prompt + your output); the paper's model then gives the predicted tokens per
target call, the break-even cost ratio and the best gamma at a cheap draft's cost ratio C_CHEAP.
Greedy decoding draws nothing, so every run (yours, the grader's) makes the same tokens from the
same code. The grader imports the constants below from its own copy of this file.
"""

from __future__ import annotations

from pathlib import Path

TEXT_FROM_CHAR = 8000      # where the prompt starts in coursedata.eval_text()
PROMPT_LEN = 64
MAX_NEW = 128
GAMMA = 4
C_CHEAP = 0.1              # a draft step costing a tenth of a target step
GAMMAS = tuple(range(1, 13))


def prompt_ids() -> list[int]:
    """The first PROMPT_LEN token ids of the eval text from TEXT_FROM_CHAR on."""
    import coursedata

    text = coursedata.eval_text()[TEXT_FROM_CHAR:TEXT_FROM_CHAR + 4000]
    return list(coursedata.load_tokenizer().encode(text))[:PROMPT_LEN]


def best_gamma(alpha: float, c: float, speedup) -> tuple[int, float]:
    """(gamma, speedup) of the largest modelled speedup over GAMMAS; the smaller gamma on a tie."""
    return max(((g, speedup(alpha, g, c)) for g in GAMMAS), key=lambda gs: (gs[1], -gs[0]))


def course_dir(name: str) -> Path:
    for root in (Path.cwd(), *Path.cwd().parents):
        if (root / "datasets" / "models" / name / "config.json").is_file():
            return root / "datasets" / "models" / name
    raise SystemExit(f"datasets/models/{name} not found above {Path.cwd()}")


def main() -> None:
    import torch
    from specdec import expected_speedup, expected_tokens_per_call, measure_acceptance, speculative_generate
    from transformer import SamplingParams, load_model

    torch.manual_seed(0)
    target = load_model(course_dir("course-llama"), dtype=torch.float32, device="cpu")
    draft = load_model(course_dir("course-llama-draft"), dtype=torch.float32, device="cpu")
    greedy = SamplingParams(temperature=0.0)
    prompt = prompt_ids()
    out = speculative_generate(target, draft, prompt, max_new_tokens=MAX_NEW, gamma=GAMMA, params=greedy,
                               generator=torch.Generator().manual_seed(0))
    alpha = float(measure_acceptance(target, draft, prompt + list(out.tokens), PROMPT_LEN, greedy).mean())
    predicted = expected_tokens_per_call(alpha, GAMMA)
    gamma, speedup = best_gamma(alpha, C_CHEAP, expected_speedup)
    print(f"alpha = {alpha:.6f}")
    print(f"tokens_per_call_measured = {out.tokens_per_call:.6f}   ({out.target_calls} target calls)")
    print(f"tokens_per_call_predicted = {predicted:.6f}")
    print(f"break_even_c = {(predicted - 1) / GAMMA:.6f}")
    print(f"best_gamma_cheap_draft = {gamma}")
    print(f"best_speedup_cheap_draft = {speedup:.6f}")


if __name__ == "__main__":
    main()
