"""What the server is asked to serve: one model folder under one name, on the given P1 engine."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class ServerConfig:
    """Settings of `build_app`.

    model_path: an HF LLaMA folder with a tokenizer.json (the course model).
    served_model_name: the name clients pass as `model`; any other name is a 404.
    max_model_len: longest prompt + completion in tokens; a request asking for more is a 400.
    engine: extra keyword arguments of minivllm's `LLM` (block_size, num_kv_blocks, max_num_seqs, ...).
    lora_adapters: adapter name -> peft LoRA folder; a client asks for one by passing its name as
        `model`. With adapters, prefix caching is off (the KV of a prefix depends on the adapter).
    """

    model_path: str | Path
    served_model_name: str = "course-llama"
    max_model_len: int = 512
    engine: dict = field(default_factory=dict)
    lora_adapters: dict[str, str | Path] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not (Path(self.model_path) / "config.json").is_file():
            raise ValueError(f"no config.json in {self.model_path}")
        if not self.served_model_name:
            raise ValueError("served_model_name must not be empty")
        if self.max_model_len < 2:
            raise ValueError(f"max_model_len must be >= 2, got {self.max_model_len}")
        if "max_model_len" in self.engine:
            raise ValueError("set max_model_len on ServerConfig, not in engine")
        for name, folder in self.lora_adapters.items():
            if not name or name == self.served_model_name:
                raise ValueError(f"adapter name {name!r} must be non-empty and differ from the served model's")
            if not (Path(folder) / "adapter_config.json").is_file():
                raise ValueError(f"adapter {name!r}: no adapter_config.json in {folder}")
        if self.lora_adapters and self.engine.get("enable_prefix_caching"):
            raise ValueError("prefix caching cannot be on with LoRA adapters: cached KV blocks do not say "
                             "which adapter computed them")
