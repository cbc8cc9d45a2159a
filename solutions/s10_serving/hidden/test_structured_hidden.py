"""Hidden: masks at the subset's edges (integers: sign, a leading 0, nine digits; a string at its
maxLength; enums sharing a prefix; the complete document allows only EOS), apply_mask's values,
advance refusing a token the mask removed, and constrained and free requests in one batch, each
equal to its own oracle (a mask on the wrong row fails one of them)."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor

import jsonschema
import pytest
import torch
from conftest import (
    EOS,
    MODEL_NAME,
    Expected,
    chat_prompt,
    check_masks,
    encode,
    judge_reply,
    model_dir,
    openai_client,
    serving,
    strings,
)

from autograder.testing import in_worker

EDGE = {"type": "object", "properties": {"n": {"type": "integer"}, "code": {"type": "string", "maxLength": 3},
                                         "flag": {"type": "boolean"}, "tone": {"enum": ["red", "reddish", "blue"]}}}
EDGE_PREFIXES = ['{"n":', '{"n":-', '{"n":-0', '{"n":0', '{"n":12345678', '{"n":123456789', '{"n":7,"code":"',
                 '{"n":7,"code":"ab', '{"n":7,"code":"abc', '{"n":7,"code":"","flag":f', '{"n":7,"code":"","flag":false,"tone":"red',
                 '{"n":7,"code":"","flag":false,"tone":"reddish"', '{"n":7,"code":"","flag":false,"tone":"blue"}']


@pytest.mark.points(3)
def test_masks_at_the_edges_of_the_subset():
    check_masks(EDGE, EDGE_PREFIXES)


@in_worker
def refuse_in_worker(folder: str, schema: dict, prefix: str, token: int) -> str:
    from pathlib import Path

    from serving import JsonFSM, TokenMasker, token_strings
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(Path(folder) / "tokenizer.json"))
    fsm = JsonFSM(schema)
    masker = TokenMasker(fsm, token_strings(tok, tok.get_vocab_size()), EOS)
    try:
        masker.advance(fsm.walk(fsm.start(), prefix), token)
    except ValueError:
        return "refused"
    return "accepted"


@pytest.mark.points(1)
def test_apply_mask_and_advance_refuses_removed_tokens():
    from serving import apply_mask

    logits = torch.randn(50, generator=torch.Generator().manual_seed(3))
    allowed = [0, 7, 8, 49]
    out = apply_mask(logits.clone(), allowed)
    want = torch.full_like(logits, float("-inf"))
    want[allowed] = logits[allowed]
    torch.testing.assert_close(out, want, rtol=0, atol=0)
    texts = strings()
    letter = next(i for i, s in enumerate(texts) if s == "a")
    assert refuse_in_worker(model_dir(), EDGE, '{"n":', letter) == "refused", "advance took 'a' where an integer must start"
    assert refuse_in_worker(model_dir(), EDGE, '{"n":1', EOS) == "refused", "advance took EOS before the document was complete"


SCHEMA_B = {"type": "object", "properties": {"title": {"type": "string", "maxLength": 20}, "year": {"type": "integer"}}}
SCHEMA_C = {"type": "object", "properties": {"whale": {"type": "boolean"}, "color": {"enum": ["white", "grey"]}}}


def constrained(port, messages, schema, n):
    with openai_client(port) as c:
        r = c.chat.completions.create(model=MODEL_NAME, messages=messages, max_tokens=n, temperature=0,
                                      response_format={"type": "json_schema", "json_schema": {"name": "s", "schema": schema}})
    return r.choices[0].message.content


def free(port, prompt, n):
    with openai_client(port) as c:
        r = c.completions.create(model=MODEL_NAME, prompt=prompt, max_tokens=n, temperature=0)
    return r.choices[0].text, r.choices[0].finish_reason


@pytest.mark.points(3)
def test_constrained_and_free_requests_in_one_batch(tol):
    near = tol("greedy near-tie")["atol"]
    m_b = [{"role": "user", "content": "Name a book and its year."}]
    m_c = [{"role": "user", "content": "Is the whale white?"}]
    with serving(max_model_len=256, num_kv_blocks=64) as port, ThreadPoolExecutor(4) as pool:
        jobs = [pool.submit(constrained, port, m_b, SCHEMA_B, 60), pool.submit(free, port, "The white whale", 20),
                pool.submit(constrained, port, m_c, SCHEMA_C, 40), pool.submit(free, port, "Queequeg said", 16)]
        b, (f1, r1), c, (f2, r2) = (j.result() for j in jobs)
    for text, schema, msgs in ((b, SCHEMA_B, m_b), (c, SCHEMA_C, m_c)):
        try:
            jsonschema.validate(json.loads(text), {**schema, "required": list(schema["properties"])})
        except (json.JSONDecodeError, jsonschema.ValidationError) as e:
            raise AssertionError(f"a constrained reply served beside others is not valid: {text!r} ({e})") from None
        want, exact = judge_reply(encode(chat_prompt(msgs)), schema, 60, near)
        assert text == want if exact else text.startswith(want), f"constrained reply {text!r}, want {want!r}"
    Expected(encode("The white whale"), 20, near).check_reply(f1, r1, None, "a free request beside constrained ones")
    Expected(encode("Queequeg said"), 16, near).check_reply(f2, r2, None, "a free request beside constrained ones")
