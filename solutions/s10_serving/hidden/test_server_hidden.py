"""Hidden: several clients at once (plain and streamed, completions and chat, text and token-id
prompts) each equal to HF greedy; a disconnected stream's sequence leaves the scheduler and its KV
blocks return to the pool; bad requests of every kind are 400s in the error shape; the server
stops and gives its port back."""

from __future__ import annotations

import json
import socket
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from conftest import (
    MODEL_NAME,
    Expected,
    chat_prompt,
    encode,
    engine_state,
    model_dir,
    openai_client,
    serving,
    start_server,
    stop_server,
    watch_abort,
)
from wire import post, read_events, stream_text


@pytest.fixture(scope="module")
def port():
    with serving(max_model_len=256, num_kv_blocks=48, max_num_seqs=8) as p:
        yield p


CASES = [
    ("completion", "The sea was calm that morning", 18, False),
    ("completion", "Mr. Darcy walked into the room and", 10, True),
    ("completion", [17, 900, 2044, 31, 77, 4095, 12], 14, True),
    ("chat", [{"role": "user", "content": "What is a whale?"}], 16, False),
    ("chat", [{"role": "system", "content": "Speak as a king."}, {"role": "user", "content": "My lord?"}], 12, True),
    ("completion", "In the beginning", 22, False),
]


def one_request(port: int, case: tuple) -> tuple[str, str | None, tuple | None]:
    kind, prompt, n, streamed = case
    with openai_client(port) as c:
        if kind == "chat":
            if streamed:
                chunks = list(c.chat.completions.create(model=MODEL_NAME, messages=prompt, max_tokens=n, temperature=0,
                                                        stream=True, stream_options={"include_usage": True}))
                text = "".join(ch.choices[0].delta.content or "" for ch in chunks if ch.choices)
                reason = next((ch.choices[0].finish_reason for ch in chunks if ch.choices and ch.choices[0].finish_reason), None)
                u = chunks[-1].usage
                return text, reason, (u.prompt_tokens, u.completion_tokens, u.total_tokens) if u else None
            r = c.chat.completions.create(model=MODEL_NAME, messages=prompt, max_tokens=n, temperature=0)
            u = r.usage
            return r.choices[0].message.content, r.choices[0].finish_reason, (u.prompt_tokens, u.completion_tokens, u.total_tokens)
        if streamed:
            chunks = list(c.completions.create(model=MODEL_NAME, prompt=prompt, max_tokens=n, temperature=0, stream=True,
                                               stream_options={"include_usage": True}))
            text = "".join(ch.choices[0].text for ch in chunks if ch.choices)
            reason = next((ch.choices[0].finish_reason for ch in chunks if ch.choices and ch.choices[0].finish_reason), None)
            u = chunks[-1].usage
            return text, reason, (u.prompt_tokens, u.completion_tokens, u.total_tokens) if u else None
        r = c.completions.create(model=MODEL_NAME, prompt=prompt, max_tokens=n, temperature=0)
        u = r.usage
        return r.choices[0].text, r.choices[0].finish_reason, (u.prompt_tokens, u.completion_tokens, u.total_tokens)


def prompt_ids(kind: str, prompt) -> list[int]:
    if kind == "chat":
        return encode(chat_prompt(prompt))
    return list(prompt) if isinstance(prompt, list) else encode(prompt)


@pytest.mark.points(4)
def test_six_clients_at_once_each_match_hf(port, tol):
    with ThreadPoolExecutor(len(CASES)) as pool:
        replies = list(pool.map(lambda case: one_request(port, case), CASES))
    for case, (text, reason, use) in zip(CASES, replies):
        kind, prompt, n, streamed = case
        assert use is not None, f"{kind} {prompt!r} (stream={streamed}): no usage (include_usage was set)"
        Expected(prompt_ids(kind, prompt), n, tol("greedy near-tie")["atol"]).check_reply(
            text, reason, use, f"{kind} {prompt!r} (stream={streamed}, {len(CASES)} clients at once)")


def wait_for(port: int, cond, seconds: float) -> dict:
    deadline, state = time.monotonic() + seconds, engine_state(port)
    while not cond(state) and time.monotonic() < deadline:
        time.sleep(0.05)
        state = engine_state(port)
    return state


@pytest.mark.points(3)
def test_disconnected_stream_frees_its_blocks(port):
    idle = wait_for(port, lambda s: not s["live"], 10)
    assert not idle["live"], f"the server holds sequences with no request running: {idle}"
    body = {"model": MODEL_NAME, "prompt": "Call me Ishmael.", "max_tokens": 240, "temperature": 0,
            "stream": True, "ignore_eos": True}
    with httpx.stream("POST", f"http://127.0.0.1:{port}/v1/completions", json=body, timeout=60) as resp:
        assert resp.status_code == 200, f"status {resp.status_code}"
        got = 0
        for line in resp.iter_lines():
            got += line.startswith("data: ")
            if got >= 3:
                break
        busy = engine_state(port)
    assert busy["live"], f"after 3 chunks of a 240-token request the scheduler holds no sequence: {busy}"
    # the client has closed the connection: the handler is cancelled, its request must be aborted at once
    state = watch_abort(port, 10)
    assert state["streams"] == 0, f"10 s after the client left, the engine still serves its stream: {state}"
    assert not state["live"] and state["running"] == 0 and state["waiting"] == 0, (
        f"the client disconnected but its sequence is still scheduled 0.1 s after its stream ended (it would "
        f"generate all 240 tokens for nobody): {state}")
    assert state["free_blocks"] == state["num_blocks"], (
        f"the disconnected sequence's KV blocks did not return to the pool: {state['free_blocks']} of "
        f"{state['num_blocks']} free")
    r = post(port, "/v1/completions", {"model": MODEL_NAME, "prompt": "Still there?", "max_tokens": 4, "temperature": 0})
    assert r.status_code == 200, f"the server after a disconnect: {r.status_code} {r.text[:200]}"


BAD = [
    ("temperature below 0", "/v1/completions", {"model": MODEL_NAME, "prompt": "x", "temperature": -1}),
    ("n = 2", "/v1/completions", {"model": MODEL_NAME, "prompt": "x", "n": 2}),
    ("no prompt", "/v1/completions", {"model": MODEL_NAME, "max_tokens": 3}),
    ("a JSON list", "/v1/completions", [1, 2, 3]),
    ("no messages", "/v1/chat/completions", {"model": MODEL_NAME, "messages": []}),
    ("an unknown role", "/v1/chat/completions", {"model": MODEL_NAME, "messages": [{"role": "robot", "content": "x"}]}),
    ("a token id past the vocabulary", "/v1/completions", {"model": MODEL_NAME, "prompt": [5, 99999], "max_tokens": 2}),
    ("chat max_tokens past the context", "/v1/chat/completions",
     {"model": MODEL_NAME, "messages": [{"role": "user", "content": "x"}], "max_tokens": 300}),
]


@pytest.mark.points(2)
def test_bad_requests_are_400_in_the_error_shape(port):
    for name, path, body in BAD:
        r = post(port, path, json.dumps(body).encode())
        assert r.status_code == 400, f"{name}: status {r.status_code}, want 400 ({r.text[:200]})"
        try:
            err = r.json()["error"]
        except (ValueError, KeyError, TypeError):
            err = None
        assert isinstance(err, dict) and isinstance(err.get("message"), str) and err.get("type"), (
            f"{name}: the body must be {{'error': {{'message', 'type', 'param', 'code'}}}}, got {r.text[:200]}")
    r = post(port, "/v1/chat/completions", {"model": "nope", "messages": [{"role": "user", "content": "x"}]})
    assert r.status_code == 404, f"chat with an unknown model: status {r.status_code}, want 404"


@pytest.mark.points(2)
def test_chat_usage_counts_the_templated_prompt(port, tol):
    messages = [{"role": "system", "content": "Be terse."}, {"role": "user", "content": "Name a ship."}]
    events, _ = read_events(port, "/v1/chat/completions", {"model": MODEL_NAME, "messages": messages, "max_tokens": 9,
                                                           "temperature": 0, "stream": True,
                                                           "stream_options": {"include_usage": True}})
    assert events[-1] == "[DONE]", f"the chat stream must end with [DONE], ends with {events[-1:]}"
    text, reason, use = stream_text(events, chat=True)
    assert use is not None, "no usage chunk in the chat stream"
    Expected(encode(chat_prompt(messages)), 9, tol("greedy near-tie")["atol"]).check_reply(
        text, reason, (use["prompt_tokens"], use["completion_tokens"], use["total_tokens"]), "streamed chat")


@pytest.mark.points(1)
def test_a_stream_ended_by_eos_carries_its_finish_reason(port):
    """A schema-constrained reply ends with EOS once the object closes (the mask allows nothing
    else): that last step adds a token but no text, and its chunk must still carry "stop"."""
    schema = {"type": "object", "properties": {"whale": {"type": "boolean"}}}
    events, _ = read_events(port, "/v1/chat/completions", {
        "model": MODEL_NAME, "messages": [{"role": "user", "content": "Is it a whale?"}], "max_tokens": 40,
        "temperature": 0, "stream": True, "response_format": {"type": "json_schema", "json_schema": {"schema": schema}}})
    text, reason, _ = stream_text(events, chat=True)
    assert isinstance(json.loads(text), dict), f"the constrained reply is not a JSON object: {text!r}"
    assert reason == "stop", (f"the stream of {text!r} ended by EOS carries finish_reason {reason!r}: the chunk "
                              f"of a step that adds no text still reports how the request finished")


@pytest.mark.points(1)
def test_server_stops_and_gives_its_port_back():
    p = start_server(model_dir(), 128, {"num_kv_blocks": 16})
    try:
        r = post(p, "/v1/completions", {"model": MODEL_NAME, "prompt": "Hello", "max_tokens": 3, "temperature": 0})
        assert r.status_code == 200, f"{r.status_code} {r.text[:200]}"
    finally:
        stopped = stop_server(p)
    assert stopped, "the server did not stop within 10 s of uvicorn's shutdown (does the app's lifespan end the engine task?)"
    with socket.socket() as s:
        s.settimeout(2)
        assert s.connect_ex(("127.0.0.1", p)) != 0, f"port {p} still accepts connections after the server stopped"
