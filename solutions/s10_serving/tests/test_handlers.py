"""Your handlers and engine loop without HTTP: request bodies parsed, prepared and answered by
`complete` and `stream` on one AsyncEngine in one event loop, all at once (the worker runs them;
the judge checks what comes back against HF greedy, the usage and the SSE framing). A quick test to
debug with before the server tests."""

from __future__ import annotations

import json

import pytest
from conftest import MODEL_NAME, Expected, chat_prompt, encode, judge_reply, model_dir
from wire import stream_text

from autograder.testing import in_worker

SCHEMA = {"type": "object", "properties": {"whale": {"type": "boolean"}, "count": {"type": "integer"}}}


@in_worker
def handle_offline(folder: str, bodies: list[list]) -> list:
    """[list_models's body] + one reply per (kind, raw body): complete()'s dict or stream()'s events."""
    import asyncio

    from minivllm import LLM
    from serving import (
        ENGINE_DEFAULTS,
        AsyncEngine,
        ChatCompletionRequest,
        CompletionRequest,
        complete,
        list_models,
        parse_body,
        prepare,
        stream,
    )

    async def main() -> list:
        llm = LLM(folder, max_model_len=256, **{**ENGINE_DEFAULTS, "num_kv_blocks": 48})
        engine = AsyncEngine(llm)
        engine.start()

        async def one(kind: str, raw: bytes):
            req = parse_body(raw, ChatCompletionRequest if kind == "chat" else CompletionRequest)
            p = prepare(req, MODEL_NAME, llm.tokenizer, 256)
            if p.stream:
                return [event async for event in stream(engine, p)]
            return await complete(engine, p)

        try:
            replies = await asyncio.gather(*(one(kind, raw) for kind, raw in bodies))
            return [list_models(MODEL_NAME, 256), *replies]
        finally:
            await engine.stop()

    return asyncio.run(main())


def body(**kw) -> bytes:
    return json.dumps({"model": MODEL_NAME, "temperature": 0, **kw}).encode()


@pytest.mark.points(3)
def test_handlers_answer_four_requests_at_once(tol):
    near = tol("greedy near-tie")["atol"]
    chat = [{"role": "user", "content": "Where is the whale?"}]
    bodies = [["completion", body(prompt="Call me Ishmael.", max_tokens=12)],
              ["completion", body(prompt="The sea", max_tokens=10, stream=True, stream_options={"include_usage": True})],
              ["chat", body(messages=chat, max_tokens=8, stream=True)],
              ["chat", body(messages=chat, max_tokens=40,
                            response_format={"type": "json_schema", "json_schema": {"schema": SCHEMA}})]]
    models, plain, events, chat_events, structured = handle_offline(model_dir(), bodies)
    assert [m["id"] for m in models["data"]] == [MODEL_NAME] and models["object"] == "list", f"list_models: {models}"
    u = plain["usage"]
    Expected(encode("Call me Ishmael."), 12, near).check_reply(
        plain["choices"][0]["text"], plain["choices"][0]["finish_reason"],
        (u["prompt_tokens"], u["completion_tokens"], u["total_tokens"]), "complete()")
    data = [e[len("data: "):].rstrip("\n") for e in events]
    assert all(e.startswith("data: ") and e.endswith("\n\n") for e in events), f"SSE framing: {events[:2]}"
    assert data[-1] == "[DONE]", f"stream() must end with 'data: [DONE]', ends with {data[-1:]}"
    text, reason, use = stream_text(data, chat=False)
    assert use is not None, "stream(): include_usage was set, no usage chunk"
    Expected(encode("The sea"), 10, near).check_reply(text, reason, (use["prompt_tokens"], use["completion_tokens"],
                                                                     use["total_tokens"]), "stream()")
    chat_data = [e[len("data: "):].rstrip("\n") for e in chat_events]
    assert json.loads(chat_data[0])["choices"][0]["delta"].get("role") == "assistant", "a chat stream opens with the role"
    text, reason, _ = stream_text(chat_data, chat=True)
    Expected(encode(chat_prompt(chat)), 8, near).check_reply(text, reason, None, "stream() of a chat")
    want, exact = judge_reply(encode(chat_prompt(chat)), SCHEMA, 40, near)
    got = structured["choices"][0]["message"]["content"]
    assert got == want if exact else got.startswith(want), f"a schema-constrained reply {got!r}, want {want!r}"
