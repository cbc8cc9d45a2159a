"""Does a real GPTQ loader read your checkpoint? (`make interop A=p3_gptq`; not part of the grade.)

  python interop.py write OUT   (the course's environment) quantize the course LLaMA's linears with
                                your GPTQ (w4, groups of 128, symmetric), pack them with your pack_v1,
                                save_checkpoint, add the model's other weights and tokenizer, and keep
                                your own dequantize_v1 of every linear and the logits of that model
  python interop.py check OUT   (an environment with gptqmodel and optimum) load OUT with
                                transformers' GPTQ integration and compare: each linear's
                                dequantize_weight() with yours, and the logits

gptqmodel reads GPTQ v1 (converting it to v2 on load): a layout bug of yours shows as weights that
differ by whole scale steps, far above fp16 rounding. Measured with the reference: gptqmodel 7.7.0
and optimum 2.3.0 on CPU, every linear within 2.4e-4 (fp16 scales), argmax of the logits 100% equal.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import torch

LINEARS = ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
           "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj")
IDS = torch.tensor([[5, 17, 300, 42, 7, 99, 1000, 12, 8, 3, 250, 4000]])  # any in-vocabulary tokens


def _course_model_dir() -> Path:
    for root in (Path.cwd(), *Path.cwd().parents):
        if (root / "datasets" / "models" / "course-llama" / "model.safetensors").is_file():
            return root / "datasets" / "models" / "course-llama"
    sys.exit("datasets/models/course-llama not found above this folder")


def write(out: Path) -> None:
    from gptq import GPTQ, QuantConfig, dequantize_v1, pack_v1, save_checkpoint
    from safetensors.torch import load_file, save_file
    from transformers import LlamaForCausalLM

    src = _course_model_dir()
    model = LlamaForCausalLM.from_pretrained(src, dtype=torch.float32).eval()
    inputs: dict[str, list[torch.Tensor]] = {}
    hooks = [model.get_submodule(f"model.layers.{i}.{lin}").register_forward_hook(
        lambda m, a, o, name=f"model.layers.{i}.{lin}": inputs.setdefault(name, []).append(a[0][0]))
        for i in range(model.config.num_hidden_layers) for lin in LINEARS]
    with torch.no_grad():
        model(torch.randint(0, model.config.vocab_size, (1, 512), generator=torch.Generator().manual_seed(0)))
    for hook in hooks:
        hook.remove()
    config, layers, expected = QuantConfig(4, 128), {}, {}
    for name, xs in inputs.items():
        quantizer = GPTQ(xs[0].shape[-1])
        quantizer.add_batch(torch.cat(xs))
        layers[name] = pack_v1(quantizer.quantize(model.get_submodule(name).weight.detach(), config))
        expected[name] = dequantize_v1(layers[name]).float()
    save_checkpoint(out, layers, config, json.loads((src / "config.json").read_text()) | {"dtype": "float16"})
    tensors = load_file(out / "model.safetensors")  # yours, then the weights GPTQ does not touch
    for key, value in load_file(src / "model.safetensors").items():
        if not any(key.startswith(name + ".") for name in layers):
            tensors[key] = value.to(torch.float16)
    save_file(tensors, str(out / "model.safetensors"), metadata={"format": "pt"})
    for extra in ("tokenizer.json", "tokenizer_config.json", "generation_config.json"):
        shutil.copy(src / extra, out / extra)
    for name, w in expected.items():
        model.get_submodule(name).weight.data = w
    with torch.no_grad():
        logits = model(IDS).logits
    torch.save({"weights": expected, "logits": logits}, out / "expected.pt")
    print(f"wrote {out}: {len(layers)} quantized linears; now `python interop.py check {out}` with gptqmodel")


def check(out: Path) -> None:
    from transformers import AutoModelForCausalLM

    expected = torch.load(out / "expected.pt")
    model = AutoModelForCausalLM.from_pretrained(out, device_map="cpu", dtype=torch.float16)
    theirs = {name: model.get_submodule(name).dequantize_weight().float() for name in expected["weights"]}
    # their orientation, (in, out) or (out, in), read off a layer that is not square
    transposed = any(t.shape != t.T.shape and t.shape == expected["weights"][n].T.shape for n, t in theirs.items())
    worst = 0.0
    for name, ours in expected["weights"].items():
        t = theirs[name].T if transposed else theirs[name]
        worst = max(worst, (t - ours).abs().max().item() / ours.abs().max().item())
    with torch.no_grad():
        logits = model(IDS).logits.float()
    agree = (logits.argmax(-1) == expected["logits"].argmax(-1)).float().mean().item()
    print(f"max |their dequantized weight - yours| / max|W| over {len(expected['weights'])} linears: {worst:.2e}")
    print(f"argmax of the logits equal on {agree:.0%} of positions")
    ok = worst < 2e-3 and agree >= 0.9  # fp16 scales round at 2^-11 relative; a layout bug is a whole step
    print("the checkpoint reads the same in gptqmodel" if ok else "MISMATCH: see the layout in the handout")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] not in ("write", "check"):
        sys.exit(__doc__)
    (write if sys.argv[1] == "write" else check)(Path(sys.argv[2]))
