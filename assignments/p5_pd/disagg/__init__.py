"""disagg: prefill/decode disaggregation over the P1 engine.

A prefill worker and decode workers, each with its own P1 engine and paged KV pool (block sizes
may differ); the KV of a prompt moves from one pool to the other (`kv_blocks`), a router places
each request on the least-loaded live decode worker and re-prefills the requests of one that dies
(`router`), the same router drives workers in other processes over torch.distributed (`remote`),
and a DistServe-style simulator picks the prefill:decode placement (`placement`).
"""

from .decode import DecodeWorker
from .kv_blocks import LAYOUTS, gather_kv, scatter_kv, token_slots
from .messages import DecodeOutput, KVMessage, PrefillRequest, Request, kv_bytes
from .placement import (SLO, LatencyModel, Placement, PlacementResult, RequestTiming, SimRequest, at_rate,
                        attainment, best_placement, fit_latency_model, goodput, simulate)
from .prefill import PrefillWorker
from .remote import RemoteDecoder, serve_decode, serve_ranks
from .router import Router

__all__ = [
    "LAYOUTS", "token_slots", "gather_kv", "scatter_kv",
    "Request", "PrefillRequest", "KVMessage", "DecodeOutput", "kv_bytes",
    "PrefillWorker", "DecodeWorker", "Router", "RemoteDecoder", "serve_decode", "serve_ranks",
    "LatencyModel", "Placement", "SLO", "SimRequest", "RequestTiming", "PlacementResult", "simulate",
    "attainment", "at_rate", "goodput", "best_placement", "fit_latency_model",
]
