"""Judge-side helpers of the LoRA tests: peft adapters made from the course model under a fixed
seed, their files (shipped to the worker as bytes), and the oracle of each: HF greedy decoding of
`merge_and_unload()` of the adapter on a deep copy of the base model. Nothing here imports the
submission."""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from pathlib import Path

import torch

from autograder.testing import oracle

# name -> LoraConfig fields, the seed its weights are drawn with, and the factor B is scaled by
# (peft's init_lora_weights=False draws a small B; scaled up, every adapter changes the greedy text).
# Different ranks and alpha / r; both adapt down_proj; together they adapt every target linear.
SPECS = {
    "ahab": ({"r": 4, "lora_alpha": 8, "target_modules": ["q_proj", "v_proj", "down_proj"]}, 11, 2.0),
    "ishmael": ({"r": 8, "lora_alpha": 4, "target_modules": ["k_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]},
                12, 3.0),
}


@dataclass
class Adapter:
    """One adapter: its files (name -> bytes), its config, its merged HF model (the oracle)."""

    name: str
    files: dict[str, bytes]
    config: dict
    merged: object


def make_adapter(base, name: str, config: dict, seed: int, scale: float, folder: Path) -> Adapter:
    """A peft LoRA of `config` on a deep copy of `base` (weights drawn from `seed`, B times `scale`),
    saved into folder/name; its files and its merged model."""
    from peft import LoraConfig, get_peft_model

    with oracle(), torch.no_grad():
        torch.manual_seed(seed)
        peft_model = get_peft_model(copy.deepcopy(base), LoraConfig(init_lora_weights=False, **config))
        for pname, p in peft_model.named_parameters():
            if ".lora_B." in pname:
                p.mul_(scale)
        peft_model.save_pretrained(str(folder / name))
        merged = peft_model.merge_and_unload().eval()
    files = {f: (folder / name / f).read_bytes() for f in ("adapter_config.json", "adapter_model.safetensors")}
    return Adapter(name, files, json.loads(files["adapter_config.json"]), merged)


def make_adapters(base, folder: Path, names: tuple[str, ...] = tuple(SPECS)) -> dict[str, Adapter]:
    return {n: make_adapter(base, n, *SPECS[n], folder) for n in names}


def lora_weights(adapter: Adapter) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
    """module name (minivllm's, e.g. "model.layers.0.mlp.down_proj") -> (A, B) as peft saved them."""
    from safetensors.torch import load

    state = load(adapter.files["adapter_model.safetensors"])
    out: dict[str, list] = {}
    for key, t in state.items():
        module = key.removeprefix("base_model.model.").rsplit(".lora_", 1)[0]
        out.setdefault(module, [None, None])[0 if ".lora_A." in key else 1] = t
    return {m: (a, b) for m, (a, b) in out.items()}
