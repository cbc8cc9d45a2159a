"""The ASGI app: `build_app(config)` returns a FastAPI application serving the OpenAI API over the
given P1 engine. Run it with any ASGI server:

    uvicorn.run(build_app(ServerConfig("datasets/models/course-llama")), host="127.0.0.1", port=8000)

or `python -m serving datasets/models/course-llama --port 8000`. The engine loads when the app is
built; its stepping task starts and stops with the app (the lifespan).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, StreamingResponse
from minivllm import LLM

from .async_engine import AsyncEngine
from .config import ServerConfig
from .lora import LoRAManager, load_adapter
from .openai_api import complete, list_models, parse_body, prepare, stream
from .protocol import APIError, ChatCompletionRequest, CompletionRequest, error_body

# CPU defaults of the course model; ServerConfig.engine overrides them.
ENGINE_DEFAULTS = {"device": "cpu", "dtype": "float32", "attention_backend": "torch", "enforce_eager": True,
                   "block_size": 16, "max_num_seqs": 16}


async def until_disconnected(request: Request, events: AsyncIterator[str]) -> AsyncIterator[str]:
    """`events` until the client disconnects, then closed (its `finally` blocks run: the request is
    aborted). Checked before each event: once the client is gone, the ASGI server drops what is
    sent without an error, and whether it cancels the handler depends on the server and version."""
    try:
        async for event in events:
            if await request.is_disconnected():
                return
            yield event
    finally:
        await events.aclose()


def build_app(config: ServerConfig) -> FastAPI:
    """The app, with the engine loaded and config.lora_adapters read onto its model. `app.state.engine`
    is its AsyncEngine."""
    no_prefix_cache = {"enable_prefix_caching": False} if config.lora_adapters else {}
    llm = LLM(config.model_path, max_model_len=config.max_model_len,
              **{**ENGINE_DEFAULTS, **config.engine, **no_prefix_cache})
    lora = None
    if config.lora_adapters:
        model = llm.model_runner.model
        lora = LoRAManager(model, [load_adapter(n, f, model) for n, f in config.lora_adapters.items()])
    adapters = list(config.lora_adapters)
    engine = AsyncEngine(llm, lora)

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        engine.start()
        yield
        await engine.stop()

    app = FastAPI(lifespan=lifespan)
    app.state.engine = engine

    @app.exception_handler(APIError)
    async def api_error(request: Request, exc: APIError) -> JSONResponse:
        return JSONResponse(error_body(exc), status_code=exc.status)

    @app.get("/v1/models")
    async def models() -> dict:
        return list_models(config.served_model_name, config.max_model_len, adapters)

    async def serve(request: Request, kind: type) -> object:
        req = parse_body(await request.body(), kind)
        p = prepare(req, config.served_model_name, llm.tokenizer, config.max_model_len, adapters)
        if p.stream:
            return StreamingResponse(until_disconnected(request, stream(engine, p)), media_type="text/event-stream")
        return JSONResponse(await complete(engine, p))

    @app.post("/v1/completions")
    async def completions(request: Request) -> object:
        return await serve(request, CompletionRequest)

    @app.post("/v1/chat/completions")
    async def chat_completions(request: Request) -> object:
        return await serve(request, ChatCompletionRequest)

    return app
