"""Locate and load the course's data: tiny trained models, tokenizer, eval text, traces, configs.

Everything lives under datasets/ at the repository root (override with the COURSE_DATASETS
environment variable). Nothing here touches the network.

    from coursedata import load_model, load_tokenizer, eval_text, load_trace, model_config
    model = load_model("course-llama")            # LlamaForCausalLM, float32, eval mode, CPU
    tok = load_tokenizer()                        # PreTrainedTokenizerFast, byte-level BPE, 8192
    trace = load_trace("nanovllm")                # Trace of 256 TraceRequest
    cfg = model_config("llama-3-8b")              # the published config.json, as a dict
    param_count(cfg)                              # 8_030_261_248
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from .params import param_count
from .traces import Trace, TraceRequest

ROOT = Path(__file__).resolve().parent.parent
DATASETS = Path(os.environ.get("COURSE_DATASETS", ROOT / "datasets"))
MODELS_DIR = DATASETS / "models"
TOKENIZER_DIR = DATASETS / "tokenizer"
EVAL_TEXT = DATASETS / "eval" / "eval.txt"
TRACES_DIR = DATASETS / "traces"
CONFIGS_DIR = DATASETS / "model_configs"
PROFILES_DIR = DATASETS / "profiles"

MODEL_NAMES = ("course-llama", "course-llama-draft")
EOT = "<|endoftext|>"  # id 0: separates documents; also BOS and EOS of the course models
PAD = "<|pad|>"  # id 1


def model_path(name: str) -> Path:
    """Folder of a course model (config.json, model.safetensors, tokenizer files)."""
    if name not in MODEL_NAMES:
        raise ValueError(f"unknown model {name!r}; known: {MODEL_NAMES}")
    return MODELS_DIR / name


def load_model(name: str = "course-llama", *, dtype=None, device: str = "cpu"):
    """The course model `name` as a transformers LlamaForCausalLM in eval mode.

    Weights are stored in bfloat16; `dtype` defaults to float32 (exact CPU reference math)."""
    import torch
    import transformers
    from transformers import LlamaForCausalLM

    # transformers 5 names the argument `dtype`; 4.x calls it `torch_dtype`
    key = "dtype" if int(transformers.__version__.split(".")[0]) >= 5 else "torch_dtype"
    model = LlamaForCausalLM.from_pretrained(str(model_path(name)), **{key: dtype or torch.float32})
    return model.to(device).eval()


def load_tokenizer():
    """The course tokenizer (byte-level BPE, 8192 ids, <|endoftext|> = 0, <|pad|> = 1)."""
    from transformers import PreTrainedTokenizerFast

    return PreTrainedTokenizerFast.from_pretrained(str(TOKENIZER_DIR))


def eval_text() -> str:
    """The held-out eval slice (about 1 MB): chunks of text each followed by <|endoftext|>."""
    return EVAL_TEXT.read_text(encoding="utf-8")


def trace_names() -> tuple[str, ...]:
    return tuple(sorted(p.stem for p in TRACES_DIR.glob("*.json")))


def load_trace(name: str) -> Trace:
    """A committed request trace: 'nanovllm', 'sharegpt', 'bursty' or 'long_prompt'."""
    path = TRACES_DIR / f"{name}.json"
    if not path.exists():
        raise ValueError(f"unknown trace {name!r}; known: {trace_names()}")
    return Trace.load(path)


def config_names() -> tuple[str, ...]:
    return tuple(sorted(p.stem for p in CONFIGS_DIR.glob("*.json")))


def model_config(name: str) -> dict:
    """A published model's config.json, e.g. 'llama-3-8b', 'deepseek-v3' (see config_names())."""
    path = CONFIGS_DIR / f"{name}.json"
    if not path.exists():
        raise ValueError(f"unknown model config {name!r}; known: {config_names()}")
    return json.loads(path.read_text())


def profile_names() -> tuple[str, ...]:
    return tuple(sorted(p.name.removesuffix(".json.gz") for p in PROFILES_DIR.glob("*.json.gz")))


def profile_path(name: str) -> Path:
    """A committed profiler trace (Chrome/Kineto JSON, gzipped) recorded on an H200 by
    datasets/profiles/record_profiles.py: 'p1_decode_eager', 'p1_decode_graphs', 'p6_attention_block'."""
    path = PROFILES_DIR / f"{name}.json.gz"
    if not path.exists():
        raise ValueError(f"unknown profiler trace {name!r}; known: {profile_names()}")
    return path


def profile_device() -> dict:
    """The device the profiles were recorded on, with its peaks measured in the same run."""
    return json.loads((PROFILES_DIR / "device.json").read_text())


__all__ = ["ROOT", "DATASETS", "MODELS_DIR", "TOKENIZER_DIR", "EVAL_TEXT", "TRACES_DIR",
           "CONFIGS_DIR", "PROFILES_DIR", "MODEL_NAMES", "EOT", "PAD", "model_path", "load_model",
           "load_tokenizer", "eval_text", "trace_names", "load_trace", "config_names", "profile_names", "profile_path", "profile_device",
           "model_config", "param_count", "Trace", "TraceRequest"]
