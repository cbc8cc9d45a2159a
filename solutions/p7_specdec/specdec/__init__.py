"""Speculative decoding and chunked prefill, reproduced and measured: the graded API of p7_specdec."""

from specdec.decode import SpecOutput, feed, measure_acceptance, speculative_generate
from specdec.probs import to_probs
from specdec.rejection import Verdict, accept, residual, verify
from specdec.serving import LatencyStats, Replay, StepRecord, TraceRequest, latency_stats, plot_timeline, replay
from specdec.theory import acceptance_rate, expected_speedup, expected_tokens_from_rates, expected_tokens_per_call

__all__ = [
    "LatencyStats",
    "Replay",
    "SpecOutput",
    "StepRecord",
    "TraceRequest",
    "Verdict",
    "accept",
    "acceptance_rate",
    "expected_speedup",
    "expected_tokens_from_rates",
    "expected_tokens_per_call",
    "feed",
    "latency_stats",
    "measure_acceptance",
    "plot_timeline",
    "replay",
    "residual",
    "speculative_generate",
    "to_probs",
    "verify",
]
