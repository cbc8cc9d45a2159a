"""python -m serving MODEL_FOLDER [--port 8000] [--name course-llama] [--max-model-len 512] [--lora NAME=PATH ...]"""

from __future__ import annotations

import argparse


def main() -> None:
    parser = argparse.ArgumentParser(description="an OpenAI-compatible server over the P1 engine")
    parser.add_argument("model_path")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--name", default="course-llama")
    parser.add_argument("--max-model-len", type=int, default=512)
    parser.add_argument("--lora", action="append", default=[], metavar="NAME=PATH",
                        help="serve the peft LoRA adapter in PATH as model NAME (repeatable)")
    opts = parser.parse_args()
    adapters = {}
    for item in opts.lora:
        name, sep, path = item.partition("=")
        if not sep or not name or not path:
            parser.error(f"--lora wants NAME=PATH, got {item!r}")
        adapters[name] = path
    import uvicorn

    from .app import build_app
    from .config import ServerConfig

    app = build_app(ServerConfig(opts.model_path, opts.name, opts.max_model_len, lora_adapters=adapters))
    uvicorn.run(app, host=opts.host, port=opts.port, log_level="warning")


if __name__ == "__main__":
    main()
