"""The judge's side of the weight-sync tests: the trainer's SGD steps on transformers' LlamaForCausalLM
(the course's draft model, float32) and transformers' greedy generation as the oracle."""

from __future__ import annotations

import functools

import torch

from autograder.testing import oracle

LR = 0.05  # large enough that every step changes the greedy tokens, small enough that they stay text
PROMPT = [515, 5917, 6650, 410, 261, 7340, 6312, 1703, 272, 890, 7285, 289]  # the eval text's first 12 tokens


@functools.cache
def training_batch() -> torch.Tensor:
    """(2, 64) token ids of the course's eval text: what each SGD step fits (next-token loss)."""
    import coursedata

    ids = list(coursedata.load_tokenizer().encode(coursedata.eval_text()[:4000]))
    return torch.tensor([ids[100:164], ids[200:264]])


def train_versions(folder: str, steps: int):
    """Yields (version, model) after each of `steps` SGD steps; version 1 is the first step."""
    from transformers import LlamaForCausalLM

    with oracle():
        torch.manual_seed(0)
        model = LlamaForCausalLM.from_pretrained(folder, dtype=torch.float32)
        opt = torch.optim.SGD(model.parameters(), lr=LR)
        for version in range(1, steps + 1):
            data = training_batch()
            model(data, labels=data).loss.backward()
            opt.step()
            opt.zero_grad()
            yield version, model


def hf_greedy(model, n: int, prompt: list[int] = PROMPT) -> list[int]:
    with oracle(), torch.no_grad():
        out = model.generate(torch.tensor([prompt]), max_new_tokens=n, do_sample=False, eos_token_id=None,
                             pad_token_id=0)
    return out[0, len(prompt):].tolist()
