"""Trainer -> rollout-worker weight sync: the trainer's updated policy reaches the inference engine
(stage P1's `minivllm`) that generates the next rollouts, with a version number on every sync so
that a rollout made with stale weights is refused rather than silently trained on.

One process (`weight_payload` + `RolloutWorker.load_weights`) or two (`send_weights` on the
trainer's rank, `RolloutWorker.receive_weights` on the worker's, over torch.distributed)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch
import torch.distributed as dist
from torch import Tensor, nn


class StaleWeightsError(RuntimeError):
    """A generate asked for a weight version the worker does not hold."""


@dataclass(frozen=True)
class SyncReport:
    """version: the version now loaded. bytes_moved: bytes of tensor data the sync carried (tensor
    payloads only, the version header excluded). num_tensors: how many tensors it carried."""

    version: int
    bytes_moved: int
    num_tensors: int


def weight_payload(model: nn.Module) -> dict[str, Tensor]:
    """The trainer's weights to send, by HF name: every parameter exactly once (a tied lm_head
    shares the embedding's storage and is not sent again), detached and contiguous."""
    # BEGIN SOLUTION
    return {name: p.detach().contiguous() for name, p in model.named_parameters()}
    # END SOLUTION


def send_weights(model: nn.Module, version: int, dst: int) -> SyncReport:
    """The trainer's side of a two-process sync: a header tensor [version, num_tensors] (int64),
    then weight_payload(model)'s tensors in sorted-name order, each by `dist.send` to rank dst."""
    if version < 1:
        raise ValueError(f"versions start at 1 (0 is the checkpoint the worker started from), got {version}")
    # BEGIN SOLUTION
    payload = weight_payload(model)
    dist.send(torch.tensor([version, len(payload)], dtype=torch.int64), dst=dst)
    for name in sorted(payload):
        dist.send(payload[name], dst=dst)
    return SyncReport(version, sum(t.numel() * t.element_size() for t in payload.values()), len(payload))
    # END SOLUTION


class RolloutWorker:
    """A minivllm engine (CPU, float32, greedy rollouts) whose weights the trainer replaces.

    `version` starts at 0 (the weights of model_path) and is the version of the last sync loaded.
    Prefix caching stays off: a cached KV block computed with the old weights would be reused after
    a sync (vLLM resets its prefix cache on every weight update for this reason)."""

    def __init__(self, model_path: str | Path, max_model_len: int = 256) -> None:
        from minivllm import LLM  # the engine is imported by the worker only: the losses need none of it

        self.llm = LLM(model_path, device="cpu", dtype="float32", enable_prefix_caching=False,
                       max_model_len=max_model_len, num_kv_blocks=64)
        self.model = self.llm.model_runner.model
        self.tied = bool(self.llm.model_config.tie_word_embeddings)
        self.version = 0

    def expected_names(self) -> list[str]:
        """The HF names a full sync carries, sorted: the engine's weights, lm_head left out when tied."""
        names = sorted(self.model.state_dict())
        return [n for n in names if not (self.tied and n == "lm_head.weight")]

    def load_weights(self, state: dict[str, Tensor], version: int) -> SyncReport:
        """Copies `state` (HF names, a full sync: exactly expected_names()) into the engine and makes
        `version` current. A version not above the current one, a missing or unknown name or a
        wrong shape is a ValueError and changes nothing. Returns the SyncReport of this sync."""
        # BEGIN SOLUTION
        if version <= self.version:
            raise ValueError(f"sync of version {version} while holding version {self.version}: versions must increase")
        own = self.model.state_dict()
        if sorted(state) != self.expected_names():
            missing = sorted(set(self.expected_names()) - set(state))
            raise ValueError(f"a sync must carry every weight once: missing {missing[:3]}, "
                             f"unknown {sorted(set(state) - set(self.expected_names()))[:3]}")
        bad = [n for n, t in state.items() if tuple(t.shape) != tuple(own[n].shape)]
        if bad:
            raise ValueError(f"{bad[0]}: shape {tuple(state[bad[0]].shape)}, the engine's is {tuple(own[bad[0]].shape)}")
        with torch.no_grad():
            for name, tensor in state.items():
                own[name].copy_(tensor)
            if self.tied:  # the engine keeps its own lm_head: refresh it from the embedding
                own["lm_head.weight"].copy_(state["model.embed_tokens.weight"])
        self.version = version
        return SyncReport(version, sum(t.numel() * t.element_size() for t in state.values()), len(state))
        # END SOLUTION

    def receive_weights(self, src: int) -> SyncReport:
        """The worker's side of send_weights: the header, then expected_names()'s tensors in order,
        each by `dist.recv` from rank src, then load_weights. A header whose count differs from
        len(expected_names()) is a ValueError."""
        # BEGIN SOLUTION
        header = torch.zeros(2, dtype=torch.int64)
        dist.recv(header, src=src)
        version, count = int(header[0]), int(header[1])
        names = self.expected_names()
        if count != len(names):
            raise ValueError(f"the trainer sends {count} tensors, this engine expects {len(names)}")
        own = self.model.state_dict()
        state = {}
        for name in names:
            state[name] = torch.empty_like(own[name])
            dist.recv(state[name], src=src)
        return self.load_weights(state, version)
        # END SOLUTION

    def generate(self, prompts: list[list[int]], max_new_tokens: int, version: int) -> list[list[int]]:
        """Greedy completions (token ids, EOS ignored) of each prompt, made with weights `version`;
        raises StaleWeightsError (naming both versions) when the worker holds another version."""
        # BEGIN SOLUTION
        if version != self.version:
            raise StaleWeightsError(f"rollout asked for weights version {version}, the worker holds version {self.version}")
        from minivllm import SamplingParams

        params = SamplingParams(temperature=0.0, max_tokens=max_new_tokens, ignore_eos=True)
        return [list(o.outputs[0].token_ids) for o in self.llm.generate(prompts, params)]
        # END SOLUTION
