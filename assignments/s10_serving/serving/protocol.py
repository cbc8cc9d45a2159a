"""The OpenAI wire format: request bodies (pydantic), the error shape, response and chunk bodies,
and server-sent events. Plain data; the handlers (openai_api.py) decide what goes in them."""

from __future__ import annotations

import json
import time

from pydantic import BaseModel, ConfigDict, Field


class _Body(BaseModel):
    model_config = ConfigDict(extra="ignore")  # clients send fields this server does not implement


class StreamOptions(_Body):
    include_usage: bool = False


class _Sampling(_Body):
    model: str
    temperature: float = Field(1.0, ge=0.0, le=2.0)
    top_p: float = Field(1.0, gt=0.0, le=1.0)
    seed: int | None = None
    n: int = Field(1, ge=1, le=1)  # one choice per request
    stream: bool = False
    stream_options: StreamOptions | None = None
    ignore_eos: bool = False  # vLLM's extension: generate max_tokens whatever the model says (benchmarks)
    response_format: dict | None = None  # {"type": "json_schema", "json_schema": {"schema": {...}}} or {"type": "text"}


class CompletionRequest(_Sampling):
    prompt: str | list[int]
    max_tokens: int = Field(16, ge=1)


class ChatMessage(_Body):
    role: str
    content: str


class ChatCompletionRequest(_Sampling):
    messages: list[ChatMessage] = Field(min_length=1)
    max_tokens: int | None = Field(None, ge=1)
    max_completion_tokens: int | None = Field(None, ge=1)  # the newer name of max_tokens


class APIError(Exception):
    """An error the client caused (or a 500): the HTTP status and the OpenAI error fields."""

    def __init__(self, status: int, message: str, type: str = "invalid_request_error",
                 param: str | None = None, code: str | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.type, self.param, self.code = status, message, type, param, code


def error_body(err: APIError) -> dict:
    """{"error": {"message", "type", "param", "code"}}: what the openai client reads from a non-2xx reply."""
    return {"error": {"message": err.message, "type": err.type, "param": err.param, "code": err.code}}


def usage(prompt_tokens: int, completion_tokens: int) -> dict:
    return {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens}


def completion_body(rid: str, model: str, text: str, finish_reason: str | None, use: dict | None) -> dict:
    """A /v1/completions reply (one choice), or with `use` None a streamed chunk of it."""
    body = {"id": rid, "object": "text_completion", "created": int(time.time()), "model": model,
            "choices": [{"index": 0, "text": text, "logprobs": None, "finish_reason": finish_reason}]}
    if use is not None:
        body["usage"] = use
    return body


def chat_body(rid: str, model: str, text: str, finish_reason: str | None, use: dict) -> dict:
    """A /v1/chat/completions reply (one choice)."""
    return {"id": rid, "object": "chat.completion", "created": int(time.time()), "model": model,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                         "logprobs": None, "finish_reason": finish_reason}], "usage": use}


def chat_chunk(rid: str, model: str, delta: dict, finish_reason: str | None) -> dict:
    """A streamed chunk of a chat reply: `delta` is {"role": "assistant"} first, then {"content": ...}."""
    return {"id": rid, "object": "chat.completion.chunk", "created": int(time.time()), "model": model,
            "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}]}


def usage_chunk(rid: str, model: str, chat: bool, use: dict) -> dict:
    """The last chunk before [DONE] when stream_options.include_usage is set: no choices, the usage."""
    return {"id": rid, "object": "chat.completion.chunk" if chat else "text_completion",
            "created": int(time.time()), "model": model, "choices": [], "usage": use}


def sse(data: dict | str) -> str:
    """One server-sent event: "data: <json or text>" and a blank line."""
    return f"data: {data if isinstance(data, str) else json.dumps(data)}\n\n"
