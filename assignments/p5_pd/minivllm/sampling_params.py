"""What a request asks for: how to pick each token and when to stop (vLLM's SamplingParams)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class SamplingParams:
    """Per-request decoding settings.

    temperature: 0 means greedy (argmax); otherwise logits are divided by it before the softmax.
    top_k: keep the k most probable tokens; -1 keeps all.
    top_p: keep the smallest set of most probable tokens whose probability sums to >= top_p
        (applied after top_k, on the renormalised distribution); 1.0 keeps all.
    max_tokens: most tokens to generate.
    ignore_eos: keep generating after the model's EOS token (it is still appended to the output).
    stop_token_ids: extra token ids that end the request (kept in the output, like EOS).
    seed: seeds this request's own generator, so its samples do not depend on the other requests
        in the batch, on preemption, or on the step it runs in. None draws from the engine's generator.
    """

    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = -1
    max_tokens: int = 16
    ignore_eos: bool = False
    stop_token_ids: list[int] = field(default_factory=list)
    seed: int | None = None

    def __post_init__(self) -> None:
        if self.temperature < 0:
            raise ValueError(f"temperature must be >= 0, got {self.temperature}")
        if not 0.0 < self.top_p <= 1.0:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p}")
        if self.top_k == 0 or self.top_k < -1:
            raise ValueError(f"top_k must be -1 (off) or >= 1, got {self.top_k}")
        if self.max_tokens < 1:
            raise ValueError(f"max_tokens must be >= 1, got {self.max_tokens}")

    @property
    def greedy(self) -> bool:
        """True when the token is the argmax (temperature 0)."""
        return self.temperature == 0.0
