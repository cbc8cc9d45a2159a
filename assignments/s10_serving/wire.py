"""Judge-side helpers of the tests: raw HTTP against the server (httpx), server-sent events read
byte for byte. Nothing here imports the submission."""

from __future__ import annotations

import json

import httpx


def post(port: int, path: str, body: bytes | dict, timeout: float = 120.0) -> httpx.Response:
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    return httpx.post(f"http://127.0.0.1:{port}{path}", content=content, timeout=timeout,
                      headers={"content-type": "application/json"})


def read_events(port: int, path: str, body: dict, timeout: float = 120.0) -> tuple[list[str], str]:
    """(the data of every server-sent event, in order; the content type) of a streamed reply.
    Asserts the framing: each event is "data: <payload>" ended by a blank line."""
    with httpx.stream("POST", f"http://127.0.0.1:{port}{path}", json=body, timeout=timeout) as resp:
        assert resp.status_code == 200, f"POST {path} (stream) answered {resp.status_code}: {resp.read()[:300]!r}"
        ctype = resp.headers.get("content-type", "")
        raw = b"".join(resp.iter_bytes()).decode()
    events = [e for e in raw.replace("\r\n", "\n").split("\n\n") if e.strip()]
    data = []
    for e in events:
        lines = [ln for ln in e.split("\n") if ln and not ln.startswith(":")]
        assert len(lines) == 1 and lines[0].startswith("data: "), f"{path}: an event that is not one 'data: ' line: {e[:200]!r}"
        data.append(lines[0][len("data: "):])
    return data, ctype


def stream_text(events: list[str], chat: bool) -> tuple[str, str | None, dict | None]:
    """(joined text, the finish reason, the usage) of the parsed JSON events before [DONE]."""
    text, reason, use = [], None, None
    for d in events:
        if d == "[DONE]":
            break
        chunk = json.loads(d)
        if chunk.get("usage"):
            use = chunk["usage"]
        for choice in chunk.get("choices") or []:
            text.append((choice.get("delta") or {}).get("content") or "" if chat else choice.get("text") or "")
            reason = choice.get("finish_reason") or reason
    return "".join(text), reason, use


def check_records(records: list[tuple], prompts, outputs, arrivals, before: float, after: float, slack: float) -> None:
    assert len(records) == len(prompts), f"{len(records)} records for {len(prompts)} requests"
    sends = [r[0] for r in records]
    t0 = min(s - a for s, a in zip(sends, arrivals))  # the latest start consistent with every send
    for i, (send, first, end, n, n_prompt, ok) in enumerate(records):
        where = f"request {i} (arrival {arrivals[i]:.3f} s, {len(prompts[i])} prompt tokens, {outputs[i]} output)"
        assert ok, f"{where}: failed"
        assert before <= send <= first <= end <= after, (
            f"{where}: times must satisfy judge start {before:.4f} <= send {send:.4f} <= first token {first:.4f} "
            f"<= end {end:.4f} <= judge end {after:.4f} (time.perf_counter readings)")
        assert n == outputs[i] and n_prompt == len(prompts[i]), (
            f"{where}: the record says {n_prompt} prompt and {n} output tokens (from the usage), want "
            f"{len(prompts[i])} and {outputs[i]} (ignore_eos)")
        assert send - before >= arrivals[i] - slack, (
            f"{where}: sent {send - before:.3f} s after the run began, before its arrival time: an open-loop "
            f"client waits for each arrival")
    spread = max(s - a for s, a in zip(sends, arrivals)) - t0
    assert spread < 2.0, f"sends drift {spread:.2f} s from the arrival schedule"
