"""Workers in separate processes: the router and the prefill worker on rank 0, a decode worker on each
other rank, talking over torch.distributed point-to-point (gloo/TCP between CPU processes).

Rank 0 holds one `RemoteDecoder` per decode rank, a stub with a decode worker's methods: each call
sends a command and waits for the answer, so the unchanged `Router` drives processes it cannot see.
A decode rank that goes away (its process killed, its process group torn down) closes its
connections: the stub's next call fails in the transport, which it raises as ConnectionError, and
the router buries that worker.
Commands and answers are small Python values (`send_object_list`); the KV of an `admit` crosses as
one tensor of its own (`dist.send` of message.kv, contiguous, the pool's dtype): the only KV bytes
on the wire, exactly the prompt positions the decode side lacks.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from .decode import DecodeWorker
from .messages import DecodeOutput, KVMessage, Request
from .prefill import PrefillWorker
from .router import Router


# the dtypes a KV message may carry, by the name the admit command gives
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def _send(obj: Any, dst: int) -> None:
    dist.send_object_list([obj], dst=dst)


def _recv(src: int) -> Any:
    box = [None]
    dist.recv_object_list(box, src=src)
    return box[0]


class RemoteDecoder:
    """Rank 0's stub for the decode worker on rank `rank` (which runs `serve_decode`).

    Answers that are exceptions on the far side are raised here again (a ValueError stays one).
    """

    def __init__(self, rank: int) -> None:
        self.rank = rank

    def _call(self, name: str, *args: Any) -> Any:
        with self._link():
            _send((name, args), self.rank)
            ok, value = _recv(self.rank)
        if not ok:
            raise value
        return value

    @contextmanager
    def _link(self) -> Iterator[None]:
        """A transport failure (the far process gone: its connection closed or reset) as ConnectionError,
        the router's sign of a dead worker. The far side's own exceptions are not transport failures."""
        try:
            yield
        except (RuntimeError, dist.DistError) as e:
            raise ConnectionError(f"decode rank {self.rank}: {e}") from e

    @property
    def load(self) -> int:
        return self._call("load")

    def can_reserve(self, num_prompt_tokens: int, max_tokens: int) -> bool:
        return self._call("can_reserve", num_prompt_tokens, max_tokens)

    def reserve(self, request_id: int, prompt_token_ids: tuple[int, ...], max_tokens: int,
                ignore_eos: bool = False) -> int:
        return self._call("reserve", request_id, tuple(prompt_token_ids), max_tokens, ignore_eos)

    def admit(self, message: KVMessage) -> DecodeOutput | None:
        """The message's fields as a command ("admit", (request_id, prompt_token_ids, first_token,
        start, kv shape, kv dtype name: a key of DTYPES)), then its KV as one contiguous tensor with
        dist.send, then the answer, as `_call` does: all of it inside `self._link()`, so that a dead
        rank surfaces as ConnectionError."""
        # BEGIN SOLUTION
        kv = message.kv.contiguous()
        header = (message.request_id, tuple(message.prompt_token_ids), int(message.first_token), message.start,
                  tuple(kv.shape), str(kv.dtype).removeprefix("torch."))  # a key of DTYPES
        with self._link():
            _send(("admit", header), self.rank)
            dist.send(kv, dst=self.rank)
            ok, value = _recv(self.rank)
        if not ok:
            raise value
        return value
        # END SOLUTION

    def step(self) -> list[DecodeOutput]:
        return self._call("step")

    def stop(self) -> dict:
        """End the far side's loop; its counters ({"kv_bytes_received": ...})."""
        return self._call("stop")


def serve_decode(worker: DecodeWorker, src: int = 0) -> dict:
    """The loop of a decode rank: execute rank `src`'s commands on `worker` until "stop".

    Commands: "load" (the worker's load), "can_reserve", "reserve", "step" (the worker's method on
    the args), "admit" (below), "stop" (answer the counters {"kv_bytes_received": ...} and return
    them). Each is answered with (True, result) or, when the worker raises ValueError, RuntimeError
    or KeyError, (False, that exception); the loop goes on. An "admit" is followed by the KV tensor:
    receive it into a fresh tensor of the header's shape and dtype (DTYPES), rebuild the KVMessage,
    admit it.
    """
    # BEGIN SOLUTION
    while True:
        name, args = _recv(src)
        if name == "stop":
            counters = {"kv_bytes_received": worker.kv_bytes_received}
            _send((True, counters), src)
            return counters
        try:
            if name == "admit":
                rid, prompt, first, start, shape, dtype = args
                kv = torch.empty(shape, dtype=DTYPES[dtype])
                dist.recv(kv, src=src)
                result = worker.admit(KVMessage(rid, prompt, first, start, kv))
            elif name == "load":
                result = worker.load
            elif name == "can_reserve":
                result = worker.can_reserve(*args)
            elif name == "reserve":
                result = worker.reserve(*args)
            elif name == "step":
                result = worker.step()
            else:
                raise ValueError(f"unknown command {name!r}")
        except (ValueError, RuntimeError, KeyError) as e:
            _send((False, e), src)
            continue
        _send((True, result), src)
    # END SOLUTION


def serve_ranks(model_path: str | Path, requests: list[Request], prefill_engine: dict, decode_engine: dict,
                max_prefill_batch: int = 8) -> dict:
    """Run on every rank of an initialised process group (world >= 2): rank 0 routes and prefills,
    ranks 1.. decode. Rank 0 returns {"outputs": {request_id: DecodeOutput}, "log": the router's
    placements, "kv_bytes_sent": the prefill worker's count}; a decode rank returns its counters.
    Only rank 0 needs `requests` (the others may pass []).
    """
    rank, world = dist.get_rank(), dist.get_world_size()
    if world < 2:
        raise ValueError("disaggregated serving needs a prefill rank and at least one decode rank")
    if rank != 0:
        return serve_decode(DecodeWorker(model_path, **decode_engine))
    prefill = PrefillWorker(model_path, **prefill_engine)
    stubs = [RemoteDecoder(r) for r in range(1, world)]
    router = Router(prefill, stubs, max_prefill_batch)
    try:
        outputs = router.run(requests)
    finally:
        for i, stub in enumerate(stubs):
            if i not in router.dead:
                stub.stop()
    return {"outputs": outputs, "log": list(router.log), "kv_bytes_sent": prefill.kv_bytes_sent}
