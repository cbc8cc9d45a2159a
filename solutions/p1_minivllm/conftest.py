"""Shared fixtures: a seeded tiny LLaMA saved as an HF folder, the HF greedy oracle, prompt makers,
and an independent auditor of the KV pool's state that tests pass as `LLM(..., on_step=...)`.

The package runs in the worker: `engine_state` reads the public state of the engine's block manager
and scheduler (stage 5's kvcache) there in one request (a block or a sequence is an object of the
worker, each attribute read a request), and `audit_blocks` checks that plain data here."""

from __future__ import annotations

import math
from collections import Counter
from pathlib import Path

import pytest
import torch

from autograder.testing import in_worker, oracle, tolerances

# The CPU tier runs tiny matmuls: thread start-up and contention cost more than they save (20x on a
# busy two-core machine), and the grader may run several test files side by side.
torch.set_num_threads(1)

# The tiny model of the CPU tier: fast enough to grade on two cores, big enough to have GQA, two
# layers and a vocabulary where a wrong KV entry changes the greedy tokens.
TINY = dict(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
            num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
            tie_word_embeddings=False, initializer_range=0.1, bos_token_id=1, eos_token_id=2)


def build_llama(path, seed: int = 0, dtype=torch.float32, device: str = "cpu", **overrides):
    """Seeded random HF LlamaForCausalLM saved with save_pretrained (config.json + model.safetensors)."""
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    config = LlamaConfig(**{**TINY, **overrides})
    model = LlamaForCausalLM(config).to(device=device, dtype=dtype).eval()
    model.save_pretrained(str(path))
    model.generation_config.eos_token_id = None  # the oracle never stops early; tests use ignore_eos
    return model


@pytest.fixture(scope="session")
def tiny_llama(tmp_path_factory):
    """(path to the HF folder, the HF model in fp32 on CPU)."""
    path = tmp_path_factory.mktemp("tiny_llama")
    return path, build_llama(path)


@pytest.fixture(scope="session")
def hf_greedy(tiny_llama):
    """hf_greedy(prompts, n) -> the n greedy tokens HF generate(do_sample=False) gives each prompt.

    The prompts run as one left-padded batch with an attention mask (in fp32 this gives the same
    tokens as one prompt at a time, for a fraction of the time); results are cached per prompt."""
    model = tiny_llama[1]
    cache: dict[tuple[tuple[int, ...], int], list[int]] = {}

    def run(prompts: list[list[int]], n: int) -> list[list[int]]:
        todo = list({tuple(p) for p in prompts if (tuple(p), n) not in cache})
        if todo:
            width = max(map(len, todo))
            ids = torch.tensor([[0] * (width - len(p)) + list(p) for p in todo])
            mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in todo])
            with torch.no_grad(), oracle():
                out = model.generate(ids, attention_mask=mask, max_new_tokens=n, do_sample=False, pad_token_id=0)
            for p, row in zip(todo, out[:, width:].tolist()):
                cache[(p, n)] = row
        return [cache[(tuple(p), n)] for p in prompts]

    return run


def random_prompts(seed: int, count: int, low: int, high: int, vocab: int = 256) -> list[list[int]]:
    """`count` prompts of random token ids, lengths uniform in [low, high]."""
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(low, high + 1, (count,), generator=g).tolist()
    return [torch.randint(0, vocab, (n,), generator=g).tolist() for n in lengths]


@pytest.fixture(scope="session")
def make_prompts():
    """make_prompts(seed, count, low, high, vocab=256): random token-id prompts."""
    return random_prompts


@pytest.fixture(scope="session")
def llama_builder():
    """build_llama(path, seed=0, dtype=torch.float32, device="cpu", **config overrides) -> HF model."""
    return build_llama


def _seq_state(seq) -> dict:
    return dict(seq_id=seq.seq_id, block_table=list(seq.block_table), num_tokens=seq.num_tokens,
                num_computed_tokens=seq.num_computed_tokens, num_completion_tokens=seq.num_completion_tokens,
                token_ids=list(seq.token_ids))


def pool_state(bm, running, waiting=(), batch=None) -> dict:
    """The public state of a block manager and of the sequences given, as plain data (checked in the
    judge by `audit_blocks`); `step_tokens` sums the tokens of the batch's entries."""
    return dict(block_size=bm.block_size, num_blocks=bm.num_blocks, free_block_ids=list(bm.free_queue),
                blocks=[dict(block_id=b.block_id, ref_count=b.ref_count, token_ids=list(b.token_ids))
                        for b in bm.blocks],
                running=[_seq_state(s) for s in running], waiting=[_seq_state(s) for s in waiting],
                step_tokens=0 if batch is None else sum(e.num_tokens for e in batch.entries))


@in_worker
def engine_state(llm, batch=None) -> dict:
    """In the worker: `pool_state` of an LLM's block manager and of its scheduler's queues."""
    sched = llm.scheduler
    return pool_state(llm.block_manager, list(sched.running), list(sched.waiting), batch)


def audit_blocks(state: dict) -> list[str]:
    """Everything wrong with the pool's bookkeeping, checked from its public state alone (`pool_state`)."""
    bs = state["block_size"]
    blocks = state["blocks"]
    problems: list[str] = []
    holders: Counter = Counter()
    for seq in state["running"]:
        table = seq["block_table"]
        if len(set(table)) != len(table):
            problems.append(f"seq {seq['seq_id']} lists a block twice: {table}")
        holders.update(table)
        lo, hi = math.ceil(seq["num_computed_tokens"] / bs), math.ceil(seq["num_tokens"] / bs)
        if not lo <= len(table) <= hi:
            problems.append(f"seq {seq['seq_id']}: {len(table)} blocks for {seq['num_computed_tokens']} computed "
                            f"of {seq['num_tokens']} tokens")
        for i, block_id in enumerate(table):
            block = blocks[block_id]
            if block["token_ids"] and list(block["token_ids"]) != seq["token_ids"][i * bs:(i + 1) * bs]:
                problems.append(f"seq {seq['seq_id']} holds cached block {block_id} of other tokens")
    for seq in state["waiting"]:
        if seq["block_table"] or seq["num_computed_tokens"]:
            problems.append(f"waiting seq {seq['seq_id']} still holds blocks or computed tokens")
    for block in blocks:
        if block["ref_count"] != holders[block["block_id"]]:
            problems.append(f"block {block['block_id']}: ref_count {block['ref_count']} but "
                            f"{holders[block['block_id']]} holder(s)")
        if holders[block["block_id"]] > 1 and len(block["token_ids"]) != bs:
            problems.append(f"block {block['block_id']} is shared but not a full cached block")
    free = state["free_block_ids"]
    if len(free) != len(set(free)):
        problems.append("a block is twice in the free list")
    unheld = {b for b in range(len(blocks)) if holders[b] == 0}
    if set(free) != unheld:
        problems.append(f"free list {sorted(set(free))} != unheld blocks {sorted(unheld)}")
    return problems


class BlockAudit:
    """on_step hook: audits the pool after every step and records what the steps did."""

    def __init__(self) -> None:
        self.steps = 0
        self.max_step_tokens = 0
        self.max_running = 0
        self.completion_lens: dict[int, int] = {}

    def __call__(self, llm, batch) -> None:
        self.steps += 1
        state = engine_state(llm, batch)
        problems = audit_blocks(state)
        assert not problems, f"after step {self.steps}: " + "; ".join(problems[:5])
        self.max_step_tokens = max(self.max_step_tokens, state["step_tokens"])
        self.max_running = max(self.max_running, len(state["running"]))
        for seq in [*state["running"], *state["waiting"]]:
            before = self.completion_lens.get(seq["seq_id"], 0)
            assert seq["num_completion_tokens"] >= before, (
                f"seq {seq['seq_id']} had {before} generated tokens, now {seq['num_completion_tokens']}")
            self.completion_lens[seq["seq_id"]] = seq["num_completion_tokens"]

    def assert_all_freed(self, llm) -> None:
        state = engine_state(llm)
        assert not state["running"] and not state["waiting"]
        assert all(b["ref_count"] == 0 for b in state["blocks"]), "blocks still referenced after all requests finished"
        assert sorted(state["free_block_ids"]) == list(range(state["num_blocks"])), (
            "blocks leaked after all requests finished")


@pytest.fixture
def block_audit():
    """The BlockAudit class: pass an instance as LLM(..., on_step=audit)."""
    return BlockAudit


_TOLERANCES = tolerances(Path(__file__).parent)


@pytest.fixture(scope="session")
def tol():
    """tol(name) -> {"rtol": r, "atol": a}: the tolerance `name` of assignment.toml's [tolerances]."""
    return _TOLERANCES
