"""The handlers of /v1/completions and /v1/chat/completions: a parsed request becomes a prompt and
SamplingParams, the engine's Deltas become one JSON reply or a stream of server-sent events.

Errors are APIError (protocol.py), which the app turns into the OpenAI error shape:
400 for a body that is not JSON or not a valid request, or a prompt + max_tokens longer than the
server's max_model_len; 404 for a model this server does not serve.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator, Collection
from contextlib import aclosing
from dataclasses import dataclass

from minivllm import SamplingParams
from pydantic import BaseModel, ValidationError

from .async_engine import AsyncEngine
from .chat import apply_chat_template
from .json_fsm import JsonFSM
from .protocol import (
    APIError,
    ChatCompletionRequest,
    CompletionRequest,
    chat_body,
    chat_chunk,
    completion_body,
    sse,
    usage,
    usage_chunk,
)


@dataclass
class Prepared:
    """A request ready for the engine."""

    rid: str                      # "cmpl-..." or "chatcmpl-..."
    model: str
    chat: bool
    prompt_ids: list[int]
    params: SamplingParams
    stream: bool
    include_usage: bool
    fsm: JsonFSM | None = None    # the response_format's JSON schema as an automaton, or None
    adapter: str | None = None    # the LoRA adapter asked for (the request's `model`), None for the base model


def list_models(served: str, max_model_len: int, adapters: Collection[str] = ()) -> dict:
    """The body of GET /v1/models: {"object": "list", "data": [model cards]}: the served model's card
    first, then one per LoRA adapter in the given order. A card has the id (the served name or the
    adapter's), "object": "model", "created" (any int), "owned_by" and max_model_len; an adapter's
    card also "parent": the served name (as vLLM lists LoRA modules)."""
    raise NotImplementedError("s10.16: list_models")


def parse_body(raw: bytes, kind: type[BaseModel]) -> BaseModel:
    """The request body as `kind`. APIError 400 when it is not JSON, not an object, or not a valid `kind`
    (the message names the first bad field)."""
    raise NotImplementedError("s10.17: parse_body")


def response_schema(response_format: dict | None) -> JsonFSM | None:
    """The automaton of a response_format: None for no format or {"type": "text"}; for
    {"type": "json_schema", "json_schema": {"schema": S, ...}} a JsonFSM of S. APIError 400 for any
    other format or a schema outside the course's subset (the message says why)."""
    if response_format is None or response_format.get("type") == "text":
        return None
    if response_format.get("type") != "json_schema" or not isinstance(response_format.get("json_schema"), dict):
        raise APIError(400, "response_format must be {'type': 'json_schema', 'json_schema': {'schema': ...}} or text",
                       param="response_format")
    try:
        return JsonFSM(response_format["json_schema"].get("schema"))
    except ValueError as e:
        raise APIError(400, f"unsupported JSON schema: {e}", param="response_format") from None


def prepare(req: CompletionRequest | ChatCompletionRequest, served: str, tokenizer, max_model_len: int,
            adapters: Collection[str] = ()) -> Prepared:
    """Check the model name (the served name: the base model; a name in `adapters`: that LoRA
    adapter; anything else: 404), build the prompt (the chat template for a chat request, token ids
    taken as they are), check prompt + max_tokens against max_model_len (400), make SamplingParams,
    and the response format's automaton (`response_schema`)."""
    raise NotImplementedError("s10.18: prepare")


def _constraint(engine: AsyncEngine, p: Prepared):
    return engine.constraint(p.fsm) if p.fsm is not None else None


async def complete(engine: AsyncEngine, p: Prepared) -> dict:
    """The whole reply of a request that does not stream: the text, the finish reason, the usage."""
    raise NotImplementedError("s10.19: complete")


async def stream(engine: AsyncEngine, p: Prepared) -> AsyncIterator[str]:
    """The server-sent events of a streamed reply: a chat stream opens with a chunk whose delta is
    {"role": "assistant"}; one chunk per Delta that carries text (a chat chunk's delta is
    {"content": text}) or a finish reason (the last); then, with stream_options.include_usage, a
    chunk with no choices and the usage; then "data: [DONE]". Closed early (the client left), it
    closes the engine's generator, so that the request is aborted at once."""
    raise NotImplementedError("s10.20: stream")
    return
    yield  # never reached; keeps this an async generator while it is a stub
