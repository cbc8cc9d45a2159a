"""The OpenAI API over loopback, with the official `openai` client and raw HTTP: /v1/models,
/v1/completions and /v1/chat/completions, plain and streamed, against HF greedy on the same
weights (computed here, in the judge); the error shape and status codes of bad requests."""

from __future__ import annotations

import json

import pytest
from conftest import MODEL_NAME, Expected, chat_prompt, encode, openai_client, serving
from wire import post, read_events, stream_text


@pytest.fixture(scope="module")
def port():
    with serving(max_model_len=256, num_kv_blocks=64) as p:
        yield p


@pytest.fixture(scope="module")
def client(port):
    with openai_client(port) as c:
        yield c


@pytest.mark.points(1)
def test_models_lists_the_served_model(client):
    names = [m.id for m in client.models.list().data]
    assert names == [MODEL_NAME], f"/v1/models lists {names}, want [{MODEL_NAME!r}]"


@pytest.mark.points(3)
def test_completion_greedy_matches_hf(client, tol):
    prompt = "Call me Ishmael. Some years ago"
    r = client.completions.create(model=MODEL_NAME, prompt=prompt, max_tokens=24, temperature=0)
    want = Expected(encode(prompt), 24, tol("greedy near-tie")["atol"])
    u = r.usage
    want.check_reply(r.choices[0].text, r.choices[0].finish_reason,
                     (u.prompt_tokens, u.completion_tokens, u.total_tokens), f"completion of {prompt!r}")
    assert r.object == "text_completion" and r.model == MODEL_NAME, f"object {r.object!r}, model {r.model!r}"


@pytest.mark.points(3)
def test_stream_joins_to_the_offline_text_and_ends_with_done(port, tol):
    prompt = "It is a truth universally acknowledged"
    body = {"model": MODEL_NAME, "prompt": prompt, "max_tokens": 20, "temperature": 0, "stream": True,
            "stream_options": {"include_usage": True}}
    events, ctype = read_events(port, "/v1/completions", body)
    assert ctype.startswith("text/event-stream"), f"a stream must be served as text/event-stream, got {ctype!r}"
    assert events and events[-1] == "[DONE]", f"the stream must end with 'data: [DONE]'; its last events: {events[-2:]}"
    assert events.count("[DONE]") == 1, "'data: [DONE]' must come once, last"
    text, reason, use = stream_text(events, chat=False)
    assert len(events) >= 5, f"{len(events)} events for 20 tokens: a stream sends its text as it is generated"
    want = Expected(encode(prompt), 20, tol("greedy near-tie")["atol"])
    assert use is not None, "stream_options.include_usage: the chunk before [DONE] must carry the usage"
    last = json.loads(events[-2])
    assert last.get("choices") == [], f"the usage chunk has an empty choices list, got {last.get('choices')!r}"
    want.check_reply(text, reason, (use["prompt_tokens"], use["completion_tokens"], use["total_tokens"]),
                     f"streamed completion of {prompt!r}")


@pytest.mark.points(3)
def test_chat_completion_uses_the_course_template(client, tol):
    messages = [{"role": "system", "content": "You answer in one line."},
                {"role": "user", "content": "Who was the captain of the Pequod?"}]
    r = client.chat.completions.create(model=MODEL_NAME, messages=messages, max_tokens=16, temperature=0)
    want = Expected(encode(chat_prompt(messages)), 16, tol("greedy near-tie")["atol"])
    u = r.usage
    assert r.choices[0].message.role == "assistant", f"role {r.choices[0].message.role!r}"
    want.check_reply(r.choices[0].message.content, r.choices[0].finish_reason,
                     (u.prompt_tokens, u.completion_tokens, u.total_tokens), "chat completion")


@pytest.mark.points(2)
def test_chat_stream_with_the_openai_client(client, tol):
    messages = [{"role": "user", "content": "Tell me of the sea."}]
    chunks = list(client.chat.completions.create(model=MODEL_NAME, messages=messages, max_tokens=12,
                                                 temperature=0, stream=True))
    assert chunks, "no chunks"
    assert chunks[0].choices[0].delta.role == "assistant", "a chat stream opens with delta.role 'assistant'"
    assert all(len(c.choices) == 1 for c in chunks), (
        "without stream_options.include_usage every chunk carries its one choice (a usage chunk was not asked for)")
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    reason = next((c.choices[0].finish_reason for c in reversed(chunks) if c.choices and c.choices[0].finish_reason), None)
    Expected(encode(chat_prompt(messages)), 12, tol("greedy near-tie")["atol"]).check_reply(
        text, reason, None, "streamed chat completion")


@pytest.mark.points(1)
def test_unknown_model_is_404_in_the_error_shape(port):
    import openai

    r = post(port, "/v1/completions", {"model": "gpt-17", "prompt": "hi", "max_tokens": 2})
    assert r.status_code == 404, f"an unknown model: status {r.status_code}, want 404"
    err = r.json().get("error")
    assert isinstance(err, dict) and isinstance(err.get("message"), str) and "type" in err, (
        f"the body must be {{'error': {{'message': ..., 'type': ..., ...}}}}, got {r.text[:300]}")
    with openai_client(port) as c, pytest.raises(openai.NotFoundError):
        c.completions.create(model="gpt-17", prompt="hi", max_tokens=2)


@pytest.mark.points(1)
def test_max_tokens_past_the_context_is_400(port):
    r = post(port, "/v1/completions", {"model": MODEL_NAME, "prompt": "Whales", "max_tokens": 256})
    assert r.status_code == 400, f"prompt + max_tokens > max_model_len (256): status {r.status_code}, want 400"
    assert isinstance(r.json().get("error"), dict), f"error shape: {r.text[:300]}"
    ok = post(port, "/v1/completions", {"model": MODEL_NAME, "prompt": "Whales", "max_tokens": 2, "temperature": 0})
    assert ok.status_code == 200, f"a request that fits must still be served: {ok.status_code} {ok.text[:200]}"


@pytest.mark.points(1)
def test_malformed_json_is_400(port):
    r = post(port, "/v1/completions", b'{"model": "course-llama", "prompt": ')
    assert r.status_code == 400, f"a body that is not JSON: status {r.status_code}, want 400 ({r.text[:200]})"
    err = r.json().get("error")
    assert isinstance(err, dict) and err.get("type") == "invalid_request_error", f"error shape: {r.text[:300]}"
