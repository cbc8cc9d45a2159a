"""python -m serving MODEL_FOLDER [--port 8000] [--name course-llama] [--max-model-len 512]"""

from __future__ import annotations

import argparse


def main() -> None:
    parser = argparse.ArgumentParser(description="an OpenAI-compatible server over the P1 engine")
    parser.add_argument("model_path")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--name", default="course-llama")
    parser.add_argument("--max-model-len", type=int, default=512)
    opts = parser.parse_args()
    import uvicorn

    from .app import build_app
    from .config import ServerConfig

    app = build_app(ServerConfig(opts.model_path, opts.name, opts.max_model_len))
    uvicorn.run(app, host=opts.host, port=opts.port, log_level="warning")


if __name__ == "__main__":
    main()
