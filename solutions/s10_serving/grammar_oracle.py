"""Judge-side oracle of structured output, independent of the package: the schema subset as a
regular expression, each token's text read from tokenizer.json here, the allowed tokens after a
prefix by the `regex` module's partial matching, and constrained greedy decoding with HF's model."""

from __future__ import annotations

import functools
import re

import regex
import torch

from autograder.testing import oracle

PRINTABLE = r"[ !#-\[\]-~]"  # printable ASCII without '"' (0x22) and '\' (0x5C)


def value_regex(value: dict) -> str:
    if "enum" in value:
        return "(?:" + "|".join(re.escape(f'"{o}"') for o in value["enum"]) + ")"
    kind = value["type"]
    if kind == "string":
        return f'"{PRINTABLE}{{0,{value.get("maxLength", 24)}}}"'
    if kind == "integer":
        return "-?(?:0|[1-9][0-9]{0,8})"
    if kind == "boolean":
        return "(?:true|false)"
    raise ValueError(kind)


def schema_regex(schema: dict) -> str:
    """The compact documents of the course subset, properties in order."""
    parts = [re.escape(f'"{name}":') + value_regex(v) for name, v in schema["properties"].items()]
    return r"\{" + ",".join(parts) + r"\}"


@functools.cache
def judge_strings(tokenizer_json: str) -> tuple:
    """Each token's text from tokenizer.json (None: special, or not all printable ASCII)."""
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(tokenizer_json)
    special = {t.content for t in tok.get_added_tokens_decoder().values()}
    out = []
    for i in range(tok.get_vocab_size()):
        piece = tok.id_to_token(i)
        s = None if piece is None or piece in special else tok.decode([i], skip_special_tokens=False)
        out.append(s if s and all(" " <= c <= "~" for c in s) else None)
    return tuple(out)


def allowed_ids(pattern: str, prefix: str, strings: tuple, eos: int) -> list[int]:
    """Token ids t with prefix + text(t) still a prefix of some match; EOS when prefix matches whole."""
    rx = regex.compile(pattern)
    ids = [i for i, s in enumerate(strings) if s and rx.fullmatch(prefix + s, partial=True)]
    if rx.fullmatch(prefix):
        ids.append(eos)
    return sorted(ids)


def greedy_with_gaps(model, prompt_ids: list[int], max_tokens: int, eos: int | None,
                     allowed_after=None) -> tuple[tuple[int, ...], tuple[float, ...]]:
    """HF generate's greedy tokens (stopping after `eos` unless None) and each step's gap between
    the top two scores; `allowed_after(generated ids)`, when given, masks every other token first."""
    from transformers import LogitsProcessor, LogitsProcessorList

    class Mask(LogitsProcessor):
        def __call__(self, input_ids, scores):
            allowed = allowed_after(input_ids[0, len(prompt_ids):].tolist())
            masked = torch.full_like(scores, float("-inf"))
            masked[:, allowed] = scores[:, allowed]
            return masked

    processors = LogitsProcessorList([Mask()] if allowed_after is not None else [])
    with oracle(), torch.no_grad():
        out = model.generate(torch.tensor([prompt_ids]), max_new_tokens=max_tokens, do_sample=False,
                             logits_processor=processors, output_scores=True, return_dict_in_generate=True,
                             eos_token_id=eos, pad_token_id=1)
    tokens = out.sequences[0, len(prompt_ids):].tolist()
    gaps = []
    for step in out.scores:
        top = torch.topk(step[0].float(), 2).values
        gaps.append(float(top[0] - top[1]))  # inf when only one token is allowed
    return tuple(tokens), tuple(gaps)


def constrained_greedy(model, prompt_ids: list[int], pattern: str, strings: tuple, eos: int,
                       max_tokens: int) -> tuple[tuple[int, ...], tuple[float, ...]]:
    """HF greedy under the regex mask: the tokens (EOS included) and each step's top-2 gap among
    the allowed tokens (inf when only one is allowed)."""
    def allowed_after(generated: list[int]) -> list[int]:
        return allowed_ids(pattern, "".join(strings[t] for t in generated), strings, eos)

    return greedy_with_gaps(model, prompt_ids, max_tokens, eos, allowed_after)
