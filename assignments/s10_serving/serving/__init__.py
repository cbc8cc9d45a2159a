"""serving: an OpenAI-compatible HTTP server over the P1 engine with JSON-schema structured output
and multi-LoRA serving, and the SLO benchmark that measures it (TTFT, TPOT, percentiles, goodput under Poisson arrivals)."""

from .app import ENGINE_DEFAULTS, build_app
from .async_engine import AsyncEngine, Constraint, Delta
from .bench_client import BenchRequest, run_benchmark
from .chat import GENERATION_PROMPT, apply_chat_template
from .config import ServerConfig
from .detokenize import IncrementalDetokenizer
from .json_fsm import JsonFSM, compile_schema
from .lora import SLOT_BASE, TARGETS, LoRAAdapter, LoRALinear, LoRAManager, load_adapter, lora_delta, token_slots
from .openai_api import Prepared, complete, list_models, parse_body, prepare, response_schema, stream
from .protocol import APIError, ChatCompletionRequest, CompletionRequest, error_body, sse, usage
from .slo import SLO, RequestRecord, Summary, latency, meets, percentile, poisson_arrivals, summarize, tpot, ttft
from .token_mask import TokenMasker, apply_mask, token_strings

__all__ = [
    "ENGINE_DEFAULTS",
    "GENERATION_PROMPT",
    "SLO",
    "SLOT_BASE",
    "TARGETS",
    "APIError",
    "AsyncEngine",
    "BenchRequest",
    "ChatCompletionRequest",
    "CompletionRequest",
    "Constraint",
    "Delta",
    "IncrementalDetokenizer",
    "JsonFSM",
    "LoRAAdapter",
    "LoRALinear",
    "LoRAManager",
    "Prepared",
    "RequestRecord",
    "ServerConfig",
    "Summary",
    "TokenMasker",
    "apply_chat_template",
    "apply_mask",
    "build_app",
    "compile_schema",
    "complete",
    "error_body",
    "latency",
    "list_models",
    "load_adapter",
    "lora_delta",
    "meets",
    "parse_body",
    "percentile",
    "poisson_arrivals",
    "prepare",
    "response_schema",
    "run_benchmark",
    "sse",
    "stream",
    "summarize",
    "token_slots",
    "token_strings",
    "tpot",
    "ttft",
    "usage",
]
