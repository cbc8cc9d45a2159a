"""Train the course's tiny LLaMA models on the tokenized corpus (seeded, CUDA or CPU).

    python datasets/train.py --model course-llama --steps 5550 --dropout 0.1 --out datasets/models/course-llama
    python datasets/train.py --model course-llama-draft --steps 1650 --lr 3e-3 \
        --teacher datasets/models/course-llama --out datasets/models/course-llama-draft

Reads datasets/.cache/tokens/{train,eval}.npy (from train_tokenizer.py). Writes an HF folder
(config.json, model.safetensors in bf16, generation_config.json, tokenizer files) that
`LlamaForCausalLM.from_pretrained(out)` loads offline, plus, in --log-dir, `<model>_loss.csv`
(one row per step; the eval loss on the rows where it was measured) and `<model>_meta.json`.

With --teacher the student also matches the teacher's next-token distribution (forward KL at
temperature 1, mixed with the usual cross-entropy), which raises the draft's acceptance rate.
With --time-budget S instead of --steps, a few timed steps pick the largest step count that fits
in S seconds; the count is recorded in <model>_meta.json so that `--steps` reproduces the run.
The checkpoint kept is the one with the lowest eval loss (evaluated every --eval-every steps).
"""

from __future__ import annotations

import argparse
import copy
import csv
import json
import math
import shutil
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

HERE = Path(__file__).resolve().parent
TOKENS = HERE / ".cache" / "tokens"

COMMON = dict(vocab_size=8192, max_position_embeddings=1024, rope_theta=10000.0,
              rms_norm_eps=1e-5, hidden_act="silu", tie_word_embeddings=True,
              attention_bias=False, mlp_bias=False, bos_token_id=0, eos_token_id=0,
              pad_token_id=1, initializer_range=0.02)
ARCH = {
    # ~11.0M parameters: 5 layers, GQA 6 query heads over 2 KV heads, SwiGLU 1024.
    "course-llama": dict(hidden_size=384, num_hidden_layers=5, num_attention_heads=6,
                         num_key_value_heads=2, head_dim=64, intermediate_size=1024),
    # ~2.8M parameters: 3 layers, 3 query heads over 1 KV head, SwiGLU 512.
    "course-llama-draft": dict(hidden_size=192, num_hidden_layers=3, num_attention_heads=3,
                               num_key_value_heads=1, head_dim=64, intermediate_size=512),
}


@dataclass
class TrainConfig:
    model: str
    out: str
    steps: int = 0
    time_budget_s: float = 0.0
    batch: int = 32
    seq: int = 1024
    lr: float = 2e-3
    min_lr_frac: float = 0.1
    warmup: int = 100
    weight_decay: float = 0.1
    grad_clip: float = 1.0
    eval_every: int = 100
    eval_windows: int = 48
    teacher: str = ""
    log_dir: str = ""  # where loss.csv and train_meta.json go (default: the output folder)
    kd_weight: float = 0.7  # share of the loss that is KL to the teacher
    max_train_tokens: int = 0  # 0: the whole train stream; N: only its first N tokens
    dropout: float = 0.0  # residual dropout while training (embeddings, attention and MLP outputs)
    seed: int = 0
    device: str = "auto"

    def __post_init__(self) -> None:
        if self.model not in ARCH:
            raise ValueError(f"model must be one of {sorted(ARCH)}, got {self.model!r}")
        if (self.steps > 0) == (self.time_budget_s > 0):
            raise ValueError("give exactly one of --steps N or --time-budget S")
        if not 0.0 <= self.kd_weight <= 1.0:
            raise ValueError("kd_weight must lie in [0, 1]")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"dropout must lie in [0, 1), got {self.dropout}")
        if self.seq > COMMON["max_position_embeddings"]:
            raise ValueError("seq may not exceed the context length (1024)")


def build_model(name: str):
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(**COMMON, **ARCH[name])
    return LlamaForCausalLM(config)


def add_residual_dropout(model, p: float) -> None:
    """GPT-2-style dropout on what enters the residual stream (the embeddings, each block's
    attention and MLP outputs), active only in train mode. HF's Llama has no such dropout; hooks
    add it without changing the saved model, which stays a plain LlamaForCausalLM."""
    if p == 0.0:
        return

    def drop(module, args, output):
        if isinstance(output, tuple):  # attention returns (output, weights)
            return (F.dropout(output[0], p, module.training),) + tuple(output[1:])
        return F.dropout(output, p, module.training)

    model.model.embed_tokens.register_forward_hook(drop)
    for layer in model.model.layers:
        layer.self_attn.register_forward_hook(drop)
        layer.mlp.register_forward_hook(drop)


def lr_at(step: int, cfg: TrainConfig, total: int) -> float:
    """Linear warm-up, then cosine decay to min_lr_frac * lr at the last step."""
    if step < cfg.warmup:
        return cfg.lr * (step + 1) / cfg.warmup
    progress = (step - cfg.warmup) / max(1, total - cfg.warmup)
    return cfg.lr * (cfg.min_lr_frac + (1 - cfg.min_lr_frac) * 0.5 * (1 + math.cos(math.pi * progress)))


def make_optimizer(model, cfg: TrainConfig, device: torch.device):
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    groups = [{"params": decay, "weight_decay": cfg.weight_decay},
              {"params": no_decay, "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=cfg.lr, betas=(0.9, 0.95), eps=1e-8,
                             fused=device.type == "cuda")


class Batches:
    """Random windows of seq+1 tokens from the training stream, from a seeded generator."""

    def __init__(self, tokens: torch.Tensor, batch: int, seq: int, seed: int):
        self.tokens, self.batch, self.seq = tokens, batch, seq
        self.gen = torch.Generator(device="cpu").manual_seed(seed)
        self.offsets = torch.arange(seq + 1, device=tokens.device)

    def next(self) -> torch.Tensor:  # (B, seq+1) int64
        starts = torch.randint(0, len(self.tokens) - self.seq - 1, (self.batch,), generator=self.gen)
        return self.tokens[starts.to(self.tokens.device)[:, None] + self.offsets]


def autocast(device: torch.device):
    return torch.autocast(device.type, dtype=torch.bfloat16, enabled=device.type == "cuda")


def loss_terms(model, teacher, x: torch.Tensor, kd_weight: float, device) -> tuple:
    """Returns (loss to minimise, cross-entropy, KL to teacher or None). x: (B, T+1)."""
    with autocast(device):
        logits = model(input_ids=x[:, :-1]).logits  # (B, T, V)
    logits = logits.float().flatten(0, 1)
    ce = F.cross_entropy(logits, x[:, 1:].flatten())
    if teacher is None:
        return ce, ce, None
    with torch.no_grad(), autocast(device):
        t_logits = teacher(input_ids=x[:, :-1]).logits
    t_logp = F.log_softmax(t_logits.float().flatten(0, 1), dim=-1)
    kl = F.kl_div(F.log_softmax(logits, dim=-1), t_logp, log_target=True, reduction="batchmean")
    return kd_weight * kl + (1 - kd_weight) * ce, ce, kl


@torch.no_grad()
def eval_loss(model, windows: torch.Tensor, device, chunk: int = 8) -> float:
    model.eval()
    total = 0.0
    for i in range(0, len(windows), chunk):
        x = windows[i:i + chunk]
        with autocast(device):
            logits = model(input_ids=x[:, :-1]).logits
        total += F.cross_entropy(logits.float().flatten(0, 1), x[:, 1:].flatten(),
                                 reduction="sum").item()
    model.train()
    return total / (windows.shape[0] * (windows.shape[1] - 1))


def calibrate_steps(model, teacher, opt, batches, cfg, device) -> int:
    """Time a few steps and return how many fit in the budget (a multiple of 50)."""
    for i in range(14):
        if i == 4:  # first steps include CUDA/cuBLAS warm-up
            if device.type == "cuda":
                torch.cuda.synchronize()
            t0 = time.perf_counter()
        loss, _, _ = loss_terms(model, teacher, batches.next(), cfg.kd_weight, device)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    if device.type == "cuda":
        torch.cuda.synchronize()
    per_step = (time.perf_counter() - t0) / 10
    # evals cost about eval_windows / (3 * batch) of a step each, every eval_every steps
    per_step *= 1 + cfg.eval_windows / (3 * cfg.batch * cfg.eval_every)
    steps = int(cfg.time_budget_s / per_step) // 50 * 50
    print(f"calibration: {per_step * 1e3:.1f} ms/step -> {steps} steps", flush=True)
    return max(steps, 50)


def save_hf(model, out: Path) -> None:
    from transformers import GenerationConfig

    out.mkdir(parents=True, exist_ok=True)
    model = copy.deepcopy(model).to("cpu", torch.bfloat16)
    model.config.dtype = "bfloat16"
    model.config.use_cache = True
    model.generation_config = GenerationConfig(bos_token_id=0, eos_token_id=0, pad_token_id=1)
    model.save_pretrained(str(out), safe_serialization=True)
    # transformers 5 writes rope_parameters; keep the classic key too so readers of either
    # generation of config.json (and students' own loaders) find the RoPE base.
    config_path = out / "config.json"
    config = json.loads(config_path.read_text())
    config.setdefault("rope_theta", COMMON["rope_theta"])
    config_path.write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(HERE / "tokenizer" / name, out / name)


def train(cfg: TrainConfig) -> dict:
    device = torch.device(("cuda" if torch.cuda.is_available() else "cpu")
                          if cfg.device == "auto" else cfg.device)
    torch.manual_seed(cfg.seed)
    np.random.seed(cfg.seed)
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True
    stream = np.load(TOKENS / "train.npy")
    if cfg.max_train_tokens:
        stream = stream[: cfg.max_train_tokens]
    train_tokens = torch.from_numpy(stream.astype(np.int64)).to(device)
    eval_tokens = torch.from_numpy(np.load(TOKENS / "eval.npy").astype(np.int64))
    n_win = min(cfg.eval_windows, len(eval_tokens) // (cfg.seq + 1))
    windows = eval_tokens[: n_win * (cfg.seq + 1)].view(n_win, cfg.seq + 1).to(device)

    model = build_model(cfg.model).to(device)
    model.config.use_cache = False
    add_residual_dropout(model, cfg.dropout)
    teacher = None
    if cfg.teacher:
        from transformers import LlamaForCausalLM

        teacher = LlamaForCausalLM.from_pretrained(cfg.teacher, dtype=torch.bfloat16).to(device)
        teacher.eval().requires_grad_(False)
    opt = make_optimizer(model, cfg, device)
    steps = cfg.steps
    if not steps:
        init = copy.deepcopy(model.state_dict())
        steps = calibrate_steps(model, teacher, opt, Batches(train_tokens, cfg.batch, cfg.seq, 99),
                                cfg, device)
        model.load_state_dict(init)
        opt = make_optimizer(model, cfg, device)
    batches = Batches(train_tokens, cfg.batch, cfg.seq, cfg.seed)

    out = Path(cfg.out)
    logs = Path(cfg.log_dir) if cfg.log_dir else out
    logs.mkdir(parents=True, exist_ok=True)
    best = (float("inf"), -1, None)
    t0 = time.perf_counter()
    with open(logs / f"{cfg.model}_loss.csv", "w", newline="") as fh:
        log = csv.writer(fh)
        log.writerow(["step", "tokens", "lr", "train_loss", "train_ce", "train_kl", "eval_loss",
                      "elapsed_s"])
        for step in range(steps):
            lr = lr_at(step, cfg, steps)
            for group in opt.param_groups:
                group["lr"] = lr
            loss, ce, kl = loss_terms(model, teacher, batches.next(), cfg.kd_weight, device)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
            opt.step()
            opt.zero_grad(set_to_none=True)
            ev = ""
            if (step + 1) % cfg.eval_every == 0 or step + 1 == steps:
                ev = eval_loss(model, windows, device)
                if ev < best[0]:
                    best = (ev, step + 1, {k: v.detach().clone() for k, v in model.state_dict().items()})
                print(f"step {step + 1}/{steps} loss {loss.item():.4f} eval {ev:.4f} "
                      f"({time.perf_counter() - t0:.0f}s)", flush=True)
            log.writerow([step + 1, (step + 1) * cfg.batch * cfg.seq, f"{lr:.3e}",
                          f"{loss.item():.4f}", f"{ce.item():.4f}",
                          "" if kl is None else f"{kl.item():.4f}",
                          "" if ev == "" else f"{ev:.4f}", f"{time.perf_counter() - t0:.1f}"])
    wall = time.perf_counter() - t0
    model.load_state_dict(best[2])
    save_hf(model, out)
    meta = {"config": asdict(cfg), "steps": steps, "best_step": best[1], "best_eval_loss": best[0],
            "tokens_seen": steps * cfg.batch * cfg.seq,
            "epochs": steps * cfg.batch * cfg.seq / len(train_tokens),
            "parameters": sum(p.numel() for p in model.parameters()),
            "train_seconds": round(wall, 1), "device": device_name(device),
            "torch": torch.__version__}
    (logs / f"{cfg.model}_meta.json").write_text(json.dumps(meta, indent=2) + "\n")
    return meta


def device_name(device: torch.device) -> str:
    return torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for name, field in TrainConfig.__dataclass_fields__.items():
        flags = ["--" + name.replace("_", "-")] + (["--time-budget"] if name == "time_budget_s" else [])
        required = name in ("model", "out")
        kind = str if required else type(field.default)
        parser.add_argument(*flags, dest=name, type=kind, required=required,
                            default=None if required else field.default)
    cfg = TrainConfig(**vars(parser.parse_args()))
    meta = train(cfg)
    print(json.dumps({k: meta[k] for k in ("steps", "best_step", "best_eval_loss", "epochs",
                                           "parameters", "train_seconds", "device")}))


if __name__ == "__main__":
    main()
