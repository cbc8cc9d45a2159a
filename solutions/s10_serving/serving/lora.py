"""Multi-LoRA serving (S-LoRA, Punica): many peft LoRA adapters over one base model, in one batch.

A LoRA adapter changes a linear layer y = W x into y = W x + scaling * B (A x), with A (r, in) and
B (out, r) of a small rank r. Merging B A into W serves one adapter per model copy; instead each
target linear keeps W untouched and adds, for every token, the low-rank product of the adapter of
that token's request: the adapters' A and B are stacked per *slot* (slot 0 = no adapter, all zeros;
slot i = the i-th registered adapter), and one forward serves a batch that mixes the base model and
several adapters.

    adapters = [load_adapter("pirate", "adapters/pirate", model)]
    lora = LoRAManager(model, adapters)      # wraps the target nn.Linear layers of `model`
    lora.set_slots(token_slots(batch.entries, slot_of))   # before each forward
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import torch
from safetensors.torch import load_file
from torch import Tensor, nn

SLOT_BASE = 0  # the slot of requests without an adapter: a delta of exactly zero
TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")  # the linears a LoRA may adapt
KEY_PREFIX = "base_model.model."  # peft's prefix of a module's name in adapter_model.safetensors


@dataclass(frozen=True)
class LoRAAdapter:
    """One peft LoRA adapter, read from its folder.

    name: the name clients ask for (the OpenAI `model` field).
    r, lora_alpha, use_rslora, target_modules: adapter_config.json's.
    scaling: lora_alpha / r (lora_alpha / sqrt(r) with use_rslora): the factor of B A.
    weights: module name in the model (e.g. "model.layers.0.mlp.down_proj") -> (A (r, in), B (out, r)).
    """

    name: str
    r: int
    lora_alpha: float
    use_rslora: bool
    target_modules: tuple[str, ...]
    scaling: float
    weights: dict[str, tuple[Tensor, Tensor]]

    def __post_init__(self) -> None:
        if not self.name:
            raise ValueError("an adapter needs a name")
        if self.r < 1 or self.scaling <= 0:
            raise ValueError(f"adapter {self.name}: r must be >= 1 and scaling > 0, got r={self.r}, scaling={self.scaling}")
        for module, (a, b) in self.weights.items():
            if a.dim() != 2 or b.dim() != 2 or a.shape[0] != self.r or b.shape[1] != self.r:
                raise ValueError(f"adapter {self.name}: {module} has A {tuple(a.shape)} and B {tuple(b.shape)}, "
                                 f"want A (r={self.r}, in) and B (out, r={self.r})")


def _read_config(folder: Path) -> dict:
    """adapter_config.json as a dict; ValueError for a missing file, bad JSON or an unsupported LoRA."""
    path = folder / "adapter_config.json"
    if not path.is_file():
        raise ValueError(f"{folder} is not a peft adapter folder: no adapter_config.json")
    try:
        cfg = json.loads(path.read_text())
    except json.JSONDecodeError as e:
        raise ValueError(f"{path} is not valid JSON: {e}") from None
    if cfg.get("peft_type", "LORA") != "LORA":
        raise ValueError(f"{path}: peft_type {cfg.get('peft_type')!r}, only LORA is served")
    if cfg.get("bias", "none") != "none":
        raise ValueError(f"{path}: bias {cfg.get('bias')!r}, only bias 'none' is served")
    for key in ("use_dora", "fan_in_fan_out", "rank_pattern", "alpha_pattern", "modules_to_save"):
        if cfg.get(key):
            raise ValueError(f"{path}: {key}={cfg[key]!r} is not supported")
    if not isinstance(cfg.get("r"), int) or cfg["r"] < 1:
        raise ValueError(f"{path}: r must be a positive int, got {cfg.get('r')!r}")
    if not isinstance(cfg.get("lora_alpha"), (int, float)) or cfg["lora_alpha"] <= 0:
        raise ValueError(f"{path}: lora_alpha must be a positive number, got {cfg.get('lora_alpha')!r}")
    targets = cfg.get("target_modules")
    if not isinstance(targets, list) or not targets or any(t not in TARGETS for t in targets):
        raise ValueError(f"{path}: target_modules must be a list of names among {TARGETS}, got {targets!r}")
    return cfg


def load_adapter(name: str, folder: str | Path, model: nn.Module) -> LoRAAdapter:
    """The adapter in `folder` (peft's save_pretrained: adapter_config.json, adapter_model.safetensors
    with keys "base_model.model.<module>.lora_A.weight" and "...lora_B.weight"), checked against
    `model` (minivllm's LlamaForCausalLM): ValueError naming the problem for a bad folder or config
    (bias other than "none", a target outside TARGETS, ...), a key that names no target linear of the
    model, an A without its B, or a shape that does not fit (A (r, in), B (out, r) of that linear).
    Tensors are cast to the model's dtype and moved to its device."""
    folder = Path(folder)
    cfg = _read_config(folder)
    # BEGIN SOLUTION
    r, alpha = cfg["r"], float(cfg["lora_alpha"])
    rslora = bool(cfg.get("use_rslora", False))
    scaling = alpha / math.sqrt(r) if rslora else alpha / r
    path = folder / "adapter_model.safetensors"
    if not path.is_file():
        raise ValueError(f"{folder}: no adapter_model.safetensors")
    state = load_file(str(path))
    modules = dict(model.named_modules())
    pairs: dict[str, dict[str, Tensor]] = {}
    for key, tensor in state.items():
        module, _, part = key.removeprefix(KEY_PREFIX).rpartition(".lora_")
        if not key.startswith(KEY_PREFIX) or part not in ("A.weight", "B.weight"):
            raise ValueError(f"{path}: unexpected key {key!r} (want {KEY_PREFIX}<module>.lora_A.weight / lora_B.weight)")
        target = modules.get(module)
        if not isinstance(target, nn.Linear) or module.rpartition(".")[2] not in cfg["target_modules"]:
            raise ValueError(f"{path}: {key!r} names no target linear of the model")
        pairs.setdefault(module, {})[part[0]] = tensor
    weights = {}
    for module, ab in pairs.items():
        if set(ab) != {"A", "B"}:
            raise ValueError(f"{path}: {module} has lora_{''.join(ab)} without its pair")
        w = modules[module].weight
        if ab["A"].shape != (r, w.shape[1]) or ab["B"].shape != (w.shape[0], r):
            raise ValueError(f"{path}: {module} has A {tuple(ab['A'].shape)}, B {tuple(ab['B'].shape)}; the model's "
                             f"linear is {w.shape[1]} -> {w.shape[0]} and r={r}")
        weights[module] = (ab["A"].to(w.device, w.dtype), ab["B"].to(w.device, w.dtype))
    if not weights:
        raise ValueError(f"{path}: no LoRA weights")
    return LoRAAdapter(name, r, alpha, rslora, tuple(cfg["target_modules"]), scaling, weights)
    # END SOLUTION


def lora_delta(x: Tensor, slots: Tensor, a: Tensor, b: Tensor, scaling: Tensor) -> Tensor:
    """The LoRA term of every row, each with its own slot's adapter: row t gets
    scaling[s] * b[s] @ (a[s] @ x[t]) with s = slots[t], and exactly 0 where s == SLOT_BASE.

    x (T, in); slots (T,) int64 in [0, S); a (S, r, in); b (S, out, r); scaling (S,). Returns (T, out)
    in x's dtype. A gathered product over the whole batch (rows grouped by slot, one pair of matmuls
    per adapter present, SGMV-style; or a per-row gather and bmm, BGMV-style), never a loop over rows
    nor a weight merged into the base."""
    # BEGIN SOLUTION
    out = x.new_zeros(x.shape[0], b.shape[1])
    for s in slots.unique().tolist():  # the adapters present in this batch
        if s == SLOT_BASE:
            continue
        rows = (slots == s).nonzero().squeeze(1)
        out[rows] = (x[rows] @ a[s].T) @ b[s].T * scaling[s]
    return out
    # END SOLUTION


def stack_slots(tensors: Sequence[Tensor]) -> Tensor:
    """(1 + n, *largest shape): slot 0 zeros (the base model), slot i + 1 tensors[i], zero-padded
    (adapters of different ranks share one stack; the padding adds exact zeros to every product)."""
    shape = [max(t.shape[d] for t in tensors) for d in range(tensors[0].dim())]
    out = torch.zeros(1 + len(tensors), *shape, dtype=tensors[0].dtype, device=tensors[0].device)
    for i, t in enumerate(tensors):
        out[1 + i][tuple(slice(0, n) for n in t.shape)] = t
    return out


class LoRALinear(nn.Module):
    """A target linear of the model with the adapters' low-rank terms on top.

    base: the model's nn.Linear, left untouched. a (S, r_max, in), b (S, out, r_max), scaling (S,):
    the slots' stacked adapters (slot 0 zeros). state: the LoRAManager whose `slots` (T,) says each
    row's slot in the current forward (None: no adapter in the batch)."""

    def __init__(self, base: nn.Linear, a: Tensor, b: Tensor, scaling: Tensor, state: LoRAManager) -> None:
        super().__init__()
        self.base = base
        self.register_buffer("a", a)
        self.register_buffer("b", b)
        self.register_buffer("scaling", scaling)
        self.state = state

    def forward(self, x: Tensor) -> Tensor:
        """base(x) plus each row's LoRA term (`lora_delta`); exactly base(x) while state.slots is None."""
        # BEGIN SOLUTION
        y = self.base(x)
        slots = self.state.slots
        if slots is None:
            return y
        return y + lora_delta(x, slots, self.a, self.b, self.scaling)
        # END SOLUTION


class LoRAManager:
    """The adapters served over one model: slot i + 1 is adapters[i], slot 0 the base model.

    Built once: every linear that some adapter targets is replaced by a LoRALinear holding the
    stacked slots (an adapter that does not target it has zeros there). Attributes: names (the
    adapters' names in slot order, from slot 1), slots (the per-row slots of the next forward)."""

    def __init__(self, model: nn.Module, adapters: Sequence[LoRAAdapter]) -> None:
        names = [ad.name for ad in adapters]
        if len(set(names)) != len(names):
            raise ValueError(f"adapter names must be unique, got {names}")
        self.names = names
        self.slots: Tensor | None = None
        wanted = {m for ad in adapters for m in ad.weights}
        for module, _ in list(model.named_modules()):
            if module in wanted and module.rpartition(".")[2] in TARGETS:
                self._wrap(model, module, adapters)

    def _wrap(self, model: nn.Module, module: str, adapters: Sequence[LoRAAdapter]) -> None:
        parent_name, _, leaf = module.rpartition(".")
        base = model.get_submodule(module)
        w = base.weight
        zero = (w.new_zeros(1, w.shape[1]), w.new_zeros(w.shape[0], 1))  # an adapter that leaves this linear alone
        a = stack_slots([ad.weights.get(module, zero)[0] for ad in adapters])
        b = stack_slots([ad.weights.get(module, zero)[1] for ad in adapters])
        scaling = stack_slots([w.new_tensor(ad.scaling) for ad in adapters])
        setattr(model.get_submodule(parent_name), leaf, LoRALinear(base, a, b, scaling, self))

    def slot(self, name: str | None) -> int:
        """The slot of adapter `name` (None: the base model, slot 0); ValueError for an unknown name."""
        if name is None:
            return SLOT_BASE
        if name not in self.names:
            raise ValueError(f"no adapter named {name!r} (served: {self.names})")
        return 1 + self.names.index(name)

    def set_slots(self, slots: Tensor) -> None:
        """The per-row slots (T,) of the next forward; a batch without adapters runs the base model
        exactly (no LoRA term at all)."""
        self.slots = slots if bool((slots != SLOT_BASE).any()) else None


def token_slots(entries: Sequence, slot_of: Callable[[int], int]) -> Tensor:
    """(T,) int64: the slot of every token row of a step, in the row order of minivllm's
    `ModelRunner.prepare` (the entries with num_tokens == 1 first, then the others, each group in
    the batch's order; an entry's num_tokens rows together). entries: the step's kvcache.BatchEntry
    (seq_id, num_tokens); slot_of(seq_id): that request's slot."""
    # BEGIN SOLUTION
    ordered = [e for e in entries if e.num_tokens == 1] + [e for e in entries if e.num_tokens != 1]
    out: list[int] = []
    for e in ordered:
        out += [slot_of(e.seq_id)] * e.num_tokens
    return torch.tensor(out, dtype=torch.long)
    # END SOLUTION
