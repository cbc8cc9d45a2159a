"""Structured output: your token mask against an independent grammar engine (the `regex` module's
partial matching of the schema's regular expression over the same token texts, computed here), and
a JSON-schema request whose reply validates with `jsonschema` and equals HF greedy decoding under
the judge's own mask."""

from __future__ import annotations

import json

import jsonschema
import pytest
from conftest import MODEL_NAME, chat_prompt, check_masks, encode, judge_reply, openai_client, serving
from wire import post

SCHEMA = {"type": "object", "additionalProperties": False, "required": ["name", "age", "captain", "ship"],
          "properties": {"name": {"type": "string", "maxLength": 12}, "age": {"type": "integer"},
                         "captain": {"type": "boolean"}, "ship": {"enum": ["Pequod", "Rachel", "Samuel Enderby"]}}}
PREFIXES = ['', '{', '{"name":"', '{"name":"Ahab', '{"name":"Ahab"', '{"name":"Ahab","age":', '{"name":"Ahab","age":-',
            '{"name":"Ahab","age":0', '{"name":"Ahab","age":58', '{"name":"Ahab","age":58,"captain":t',
            '{"name":"Ahab","age":58,"captain":false,"ship":"', '{"name":"Ahab","age":58,"captain":false,"ship":"Sa',
            '{"name":"Ahab","age":58,"captain":false,"ship":"Rachel"}']


@pytest.mark.points(3)
def test_mask_matches_an_independent_grammar():
    check_masks(SCHEMA, PREFIXES)


@pytest.mark.points(4)
def test_json_schema_reply_validates_and_matches_constrained_greedy(tol):
    messages = [{"role": "user", "content": "Describe the captain of the Pequod as JSON."}]
    with serving(max_model_len=256, num_kv_blocks=48) as port, openai_client(port) as client:
        r = client.chat.completions.create(
            model=MODEL_NAME, messages=messages, max_tokens=80, temperature=0,
            response_format={"type": "json_schema", "json_schema": {"name": "captain", "schema": SCHEMA}})
    text = r.choices[0].message.content
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        raise AssertionError(f"the reply is not JSON ({e}): {text!r}") from None
    jsonschema.validate(doc, SCHEMA)
    want, exact = judge_reply(encode(chat_prompt(messages)), SCHEMA, 80, tol("greedy near-tie")["atol"])
    if exact:
        assert text == want, f"the reply differs from HF greedy under the grammar's mask\n  got:  {text!r}\n  want: {want!r}"
        assert r.choices[0].finish_reason == "stop", "a complete document ends with EOS: finish_reason 'stop'"
    else:
        assert text.startswith(want), f"before HF's first near-tie the reply differs\n  got:  {text!r}\n  want: {want!r}..."


@pytest.mark.points(1)
def test_unsupported_schema_is_400():
    bad = {"type": "object", "properties": {"x": {"type": "array"}}}
    with serving(max_model_len=128, num_kv_blocks=16) as port:
        r = post(port, "/v1/chat/completions", {"model": MODEL_NAME, "messages": [{"role": "user", "content": "x"}],
                                                "response_format": {"type": "json_schema", "json_schema": {"schema": bad}}})
        ok = post(port, "/v1/chat/completions", {"model": MODEL_NAME, "messages": [{"role": "user", "content": "x"}],
                                                 "max_tokens": 20, "temperature": 0, "response_format": {
                                                     "type": "json_schema", "json_schema": {"schema": {
                                                         "type": "object", "properties": {"x": {"type": "boolean"}}}}}})
    assert r.status_code == 400 and isinstance(r.json().get("error"), dict), f"an array schema: {r.status_code} {r.text[:200]}"
    assert ok.status_code == 200, f"a supported schema: {ok.status_code} {ok.text[:200]}"
    jsonschema.validate(json.loads(ok.json()["choices"][0]["message"]["content"]),
                        {"type": "object", "properties": {"x": {"type": "boolean"}}, "required": ["x"]})
