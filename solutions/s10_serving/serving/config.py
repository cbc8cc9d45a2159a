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
    """

    model_path: str | Path
    served_model_name: str = "course-llama"
    max_model_len: int = 512
    engine: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not (Path(self.model_path) / "config.json").is_file():
            raise ValueError(f"no config.json in {self.model_path}")
        if not self.served_model_name:
            raise ValueError("served_model_name must not be empty")
        if self.max_model_len < 2:
            raise ValueError(f"max_model_len must be >= 2, got {self.max_model_len}")
        if "max_model_len" in self.engine:
            raise ValueError("set max_model_len on ServerConfig, not in engine")
