"""What `LLM.generate` returns, shaped like vLLM's RequestOutput / CompletionOutput."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class RequestMetrics:
    """Wall-clock instants (time.perf_counter seconds) in a request's life."""

    arrival_time: float
    first_scheduled_time: float | None = None
    first_token_time: float | None = None
    finished_time: float | None = None

    @property
    def ttft(self) -> float | None:
        """Time to first token: arrival to the first generated token."""
        if self.first_token_time is None:
            return None
        return self.first_token_time - self.arrival_time


@dataclass
class CompletionOutput:
    index: int
    text: str
    token_ids: list[int]
    finish_reason: str | None  # "stop" (EOS or a stop token), "length" (max_tokens or max_model_len)
    cumulative_logprob: float | None = None


@dataclass
class RequestOutput:
    request_id: str
    prompt: str | None
    prompt_token_ids: list[int]
    outputs: list[CompletionOutput] = field(default_factory=list)
    finished: bool = True
    num_cached_tokens: int = 0
    metrics: RequestMetrics | None = None

    def tpot(self) -> float | None:
        """Time per output token after the first: (finished - first token) / (n - 1)."""
        m, n = self.metrics, len(self.outputs[0].token_ids) if self.outputs else 0
        if m is None or m.first_token_time is None or m.finished_time is None or n < 2:
            return None
        return (m.finished_time - m.first_token_time) / (n - 1)
